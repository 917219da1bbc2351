#include "weighted_sum.hpp"

namespace decoupled {

bool weighted_add(WeightedSum* s, int64_t diff, int64_t value) {
    // |product| <= 2^126: 64 x 64 bits never overflow 128 signed bits.
    __int128 product = static_cast<__int128>(diff) * value;
    __int128 next;
    if (__builtin_add_overflow(s->sum, product, &next)) return false;
    s->sum = next;
    s->any = true;
    return true;
}

std::size_t int128_decimal(__int128 v, char* buf) {
    char digits[kInt128DecimalSize];
    std::size_t n = 0;
    bool negative = v < 0;
    // Digit by digit off the signed value: -(2^127) has no positive twin.
    do {
        int d = static_cast<int>(v % 10);
        digits[n++] = static_cast<char>('0' + (d < 0 ? -d : d));
        v /= 10;
    } while (v != 0);
    std::size_t len = 0;
    if (negative) buf[len++] = '-';
    while (n > 0) buf[len++] = digits[--n];
    buf[len] = '\0';
    return len;
}

}  // namespace decoupled
