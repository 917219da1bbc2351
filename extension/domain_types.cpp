// Types that reach a domain, and literals that never run its check
// (domain_types.hpp).
extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
}

#include "domain_types.hpp"

namespace decoupled {

namespace {

bool reaches_domain_at(Oid type, int depth) {
    if (depth > 32) return true;  // deeper than any type PostgreSQL makes: assume so
    check_stack_depth();
    switch (get_typtype(type)) {
        case TYPTYPE_DOMAIN:
            return true;
        case TYPTYPE_COMPOSITE: {
            Relation rel = relation_open(get_typ_typrelid(type), AccessShareLock);
            TupleDesc desc = RelationGetDescr(rel);
            bool found = false;
            for (int i = 0; i < desc->natts && !found; i++) {
                Form_pg_attribute a = TupleDescAttr(desc, i);
                found = !a->attisdropped && reaches_domain_at(a->atttypid, depth + 1);
            }
            relation_close(rel, AccessShareLock);
            return found;
        }
        case TYPTYPE_RANGE:
            return reaches_domain_at(get_range_subtype(type), depth + 1);
        case TYPTYPE_MULTIRANGE:
            return reaches_domain_at(get_multirange_range(type), depth + 1);
        default: {
            Oid element = get_element_type(type);
            return OidIsValid(element) && reaches_domain_at(element, depth + 1);
        }
    }
}

}  // namespace

bool reaches_domain(Oid type) { return reaches_domain_at(type, 0); }

Oid literal_type_if_any(Oid type) {
    Oid base = getBaseType(type);
    Oid element = get_element_type(base);
    if (OidIsValid(element) && get_typtype(element) == TYPTYPE_DOMAIN) {
        Oid array = get_array_type(getBaseType(element));
        if (OidIsValid(array)) base = array;
    }
    return reaches_domain(base) ? InvalidOid : base;
}

Oid literal_type(Oid type) {
    Oid base = literal_type_if_any(type);
    if (!OidIsValid(base))
        ereport(ERROR,
                (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                 errmsg("cannot compare keys of type %s in a maintenance step", format_type_be(type)),
                 errdetail("Its values hold a domain whose check would run with the extension's "
                           "rights."),
                 errhint("Use the domain's base type in the view's keys.")));
    return base;
}

}  // namespace decoupled
