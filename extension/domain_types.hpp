// Types whose values run a domain's CHECK when they are converted from
// text — code a domain's author wrote, which must never run with the
// extension's rights (docs/architecture.md, "Security model", rule 5).
#pragma once

extern "C" {
#include "postgres.h"
}

namespace decoupled {

// Whether converting a value of `type` runs a domain's check: it is a
// domain, or holds one as an array's element, a composite's attribute, a
// range's subtype or a multirange's range.
bool reaches_domain(Oid type);

// The type to write a literal of `type` as, in a statement that runs with
// the extension's rights, for values that came from storage (and so pass
// every check already): `type` with a domain, or an array's domain
// element, taken off.  Refuses (0A000) a composite or range type holding
// a domain, which cannot be written without running its check.
Oid literal_type(Oid type);
// The same, or InvalidOid where literal_type refuses.
Oid literal_type_if_any(Oid type);

}  // namespace decoupled
