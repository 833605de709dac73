/*
 * test_dtype.c: element types, fp16 conversion (exact values, rounding to nearest even,
 * subnormals, overflow, inf and nan), and the local reduction and scaling kernels.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "internal.h"

#include <math.h>
#include <string.h>

static void test_sizes(void **state) {
  (void)state;
  assert_int_equal(rh_dtype_size(RH_FLOAT32), 4);
  assert_int_equal(rh_dtype_size(RH_FLOAT64), 8);
  assert_int_equal(rh_dtype_size(RH_FLOAT16), 2);
  assert_int_equal(rh_dtype_size(RH_INT32), 4);
  assert_int_equal(rh_dtype_size(RH_DTYPE_COUNT), 0);
}

static void test_half_known_values(void **state) {
  (void)state;
  /* bit patterns from IEEE 754 binary16 */
  assert_int_equal(rh_float_to_half(0.0f), 0x0000);
  assert_int_equal(rh_float_to_half(-0.0f), 0x8000);
  assert_int_equal(rh_float_to_half(1.0f), 0x3c00);
  assert_int_equal(rh_float_to_half(-2.0f), 0xc000);
  assert_int_equal(rh_float_to_half(65504.0f), 0x7bff);       /* largest finite */
  assert_int_equal(rh_float_to_half(0.333251953125f), 0x3555); /* nearest to 1/3 */
  assert_int_equal(rh_float_to_half(0x1p-14f), 0x0400);       /* smallest normal */
  assert_int_equal(rh_float_to_half(0x1p-24f), 0x0001);       /* smallest subnormal */
  assert_int_equal(rh_float_to_half(INFINITY), 0x7c00);
  assert_int_equal(rh_float_to_half(-INFINITY), 0xfc00);
  assert_true(isnan(rh_half_to_float(rh_float_to_half(NAN))));
  assert_true(rh_half_to_float(0x7bff) == 65504.0f);
  assert_true(rh_half_to_float(0x0001) == 0x1p-24f);
  assert_true(rh_half_to_float(0x03ff) == 0x3ffp-24f); /* largest subnormal */
  assert_true(isinf(rh_half_to_float(0x7c00)));
}

static void test_half_rounding(void **state) {
  (void)state;
  /* 2049 lies half way between 2048 and 2050: ties go to the even mantissa (2048) */
  assert_true(rh_half_to_float(rh_float_to_half(2049.0f)) == 2048.0f);
  assert_true(rh_half_to_float(rh_float_to_half(2051.0f)) == 2052.0f);
  assert_true(rh_half_to_float(rh_float_to_half(2050.5f)) == 2050.0f);
  /* overflow past the largest finite rounds to inf; just below rounds down */
  assert_true(isinf(rh_half_to_float(rh_float_to_half(65520.0f))));
  assert_true(rh_half_to_float(rh_float_to_half(65519.0f)) == 65504.0f);
  /* below half the smallest subnormal flushes to zero; a tie rounds to even (zero) */
  assert_int_equal(rh_float_to_half(0x1p-26f), 0);
  assert_int_equal(rh_float_to_half(0x1p-25f), 0);
  assert_int_equal(rh_float_to_half(0x1.8p-25f), 1);
}

static void test_half_round_trip_all(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000; h++) {
    uint16_t v = (uint16_t)h;
    float f = rh_half_to_float(v);
    if (isnan(f)) continue;
    assert_int_equal(rh_float_to_half(f), v);
  }
}

static void test_half_from_double_rounds_once(void **state) {
  (void)state;
  /* 1 + 2^-11 + 2^-40 is just above the half-way point between 1 and 1 + 2^-10: the correct half
   * is 1 + 2^-10, but rounding to float first lands on the tie, which goes to even (1.0) */
  double d[3] = {1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-11, -(1.0 + 0x1p-11 + 0x1p-40)};
  uint16_t h[3];
  rh__to_half(h, d, 3, RH_FLOAT64);
  assert_true(rh_half_to_float(h[0]) == 1.0f + 0x1p-10f);
  assert_true(rh_half_to_float(h[1]) == 1.0f); /* an exact tie still goes to even */
  assert_true(rh_half_to_float(h[2]) == -(1.0f + 0x1p-10f));
}

static void test_reduce_ops(void **state) {
  (void)state;
  float a[4] = {1, -2, 3, 0.5f}, b[4] = {4, 5, -6, 0.25f};
  float s[4];
  memcpy(s, a, sizeof a);
  rh__reduce(s, b, 4, RH_FLOAT32, RH_SUM);
  assert_true(s[0] == 5 && s[1] == 3 && s[2] == -3 && s[3] == 0.75f);
  memcpy(s, a, sizeof a);
  rh__reduce(s, b, 4, RH_FLOAT32, RH_MIN);
  assert_true(s[0] == 1 && s[1] == -2 && s[2] == -6 && s[3] == 0.25f);
  memcpy(s, a, sizeof a);
  rh__reduce(s, b, 4, RH_FLOAT32, RH_MAX);
  assert_true(s[0] == 4 && s[1] == 5 && s[2] == 3 && s[3] == 0.5f);

  int32_t i[3] = {INT32_MAX, -5, 7}, j[3] = {1, 5, -9};
  rh__reduce(i, j, 3, RH_INT32, RH_SUM);
  assert_int_equal(i[0], INT32_MIN); /* wraps like the GPU kernels */
  assert_int_equal(i[1], 0);
  assert_int_equal(i[2], -2);

  double d[2] = {1e300, -1}, e[2] = {1e300, 2};
  rh__reduce(d, e, 2, RH_FLOAT64, RH_MAX);
  assert_true(d[0] == 1e300 && d[1] == 2);

  uint16_t h[2] = {rh_float_to_half(1.5f), rh_float_to_half(-3)};
  uint16_t g[2] = {rh_float_to_half(2.25f), rh_float_to_half(1)};
  rh__reduce(h, g, 2, RH_FLOAT16, RH_SUM);
  assert_true(rh_half_to_float(h[0]) == 3.75f && rh_half_to_float(h[1]) == -2.0f);
}

static void test_scale(void **state) {
  (void)state;
  float f[2] = {3, -1};
  rh__scale(f, 2, RH_FLOAT32, 0.5);
  assert_true(f[0] == 1.5f && f[1] == -0.5f);
  int32_t i[3] = {7, -7, 8};
  rh__scale(i, 3, RH_INT32, 0.5);
  assert_int_equal(i[0], 3); /* truncation toward zero */
  assert_int_equal(i[1], -3);
  assert_int_equal(i[2], 4);
  uint16_t h = rh_float_to_half(6);
  rh__scale(&h, 1, RH_FLOAT16, 0.25);
  assert_true(rh_half_to_float(h) == 1.5f);
}

static void test_names(void **state) {
  (void)state;
  assert_string_equal(rh_dtype_name(RH_FLOAT16), "half");
  assert_string_equal(rh_op_name(RH_AVERAGE), "avg");
  assert_string_equal(rh_status_string(RH_ERR_PEER_DEAD), "a peer died");
  assert_string_equal(rh_status_string((rh_status)-99), "unknown status");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes),        cmocka_unit_test(test_half_known_values),
      cmocka_unit_test(test_half_rounding), cmocka_unit_test(test_half_round_trip_all),
      cmocka_unit_test(test_half_from_double_rounds_once),
      cmocka_unit_test(test_reduce_ops),    cmocka_unit_test(test_scale),
      cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
