/*
 * dtype.c: element types, the local reduction kernels, scaling, and IEEE binary16 conversion.
 * fp16 values are reduced in float and rounded back after every addition, as a GPU kernel that
 * loads, adds and stores half values does.
 */
#include "internal.h"

#include <math.h>
#include <string.h>

size_t rh_dtype_size(rh_dtype dtype) {
  switch (dtype) {
  case RH_FLOAT32: return 4;
  case RH_FLOAT64: return 8;
  case RH_FLOAT16: return 2;
  case RH_INT32: return 4;
  default: return 0;
  }
}

const char *rh_dtype_name(rh_dtype dtype) {
  switch (dtype) {
  case RH_FLOAT32: return "float";
  case RH_FLOAT64: return "double";
  case RH_FLOAT16: return "half";
  case RH_INT32: return "int32";
  default: return "?";
  }
}

const char *rh_op_name(rh_op op) {
  switch (op) {
  case RH_SUM: return "sum";
  case RH_AVERAGE: return "avg";
  case RH_MIN: return "min";
  case RH_MAX: return "max";
  default: return "?";
  }
}

uint16_t rh_float_to_half(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xffu) /* inf or nan; keep nan quiet and non-zero */
    return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
  if (e <= 0) {                                   /* subnormal half, or zero */
    if (e < -10) return sign;
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* may carry into inf: correct */
  return (uint16_t)(sign | half);
}

float rh_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else { /* subnormal: normalise */
      int e = -1;
      do {
        e++;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

#define REDUCE_LOOP(T, EXPR)                                                                       \
  do {                                                                                             \
    T *d = dst;                                                                                    \
    const T *s = src;                                                                              \
    for (size_t i = 0; i < count; i++) {                                                           \
      T a = d[i], b = s[i];                                                                        \
      d[i] = (EXPR);                                                                               \
    }                                                                                              \
  } while (0)

#define REDUCE_TYPE(T)                                                                             \
  do {                                                                                             \
    if (op == RH_MIN) REDUCE_LOOP(T, b < a ? b : a);                                               \
    else if (op == RH_MAX) REDUCE_LOOP(T, b > a ? b : a);                                          \
    else REDUCE_LOOP(T, a + b);                                                                    \
  } while (0)

void rh__reduce(void *dst, const void *src, size_t count, rh_dtype dtype, rh_op op) {
  switch (dtype) {
  case RH_FLOAT32: REDUCE_TYPE(float); break;
  case RH_FLOAT64: REDUCE_TYPE(double); break;
  case RH_INT32: {
    if (op == RH_SUM || op == RH_AVERAGE) { /* wrap around like the GPU kernels, without UB */
      uint32_t *d = dst;
      const uint32_t *s = src;
      for (size_t i = 0; i < count; i++) d[i] += s[i];
    } else {
      REDUCE_TYPE(int32_t);
    }
    break;
  }
  case RH_FLOAT16: {
    uint16_t *d = dst;
    const uint16_t *s = src;
    for (size_t i = 0; i < count; i++) {
      float a = rh_half_to_float(d[i]), b = rh_half_to_float(s[i]), r;
      if (op == RH_MIN) r = b < a ? b : a;
      else if (op == RH_MAX) r = b > a ? b : a;
      else r = a + b;
      d[i] = rh_float_to_half(r);
    }
    break;
  }
  default: break;
  }
}

void rh__scale(void *buf, size_t count, rh_dtype dtype, double factor) {
  if (factor == 1.0) return;
  switch (dtype) {
  case RH_FLOAT32: {
    float *b = buf;
    float f = (float)factor;
    for (size_t i = 0; i < count; i++) b[i] *= f;
    break;
  }
  case RH_FLOAT64: {
    double *b = buf;
    for (size_t i = 0; i < count; i++) b[i] *= factor;
    break;
  }
  case RH_INT32: {
    int32_t *b = buf;
    for (size_t i = 0; i < count; i++) b[i] = (int32_t)trunc((double)b[i] * factor);
    break;
  }
  case RH_FLOAT16: {
    uint16_t *b = buf;
    for (size_t i = 0; i < count; i++)
      b[i] = rh_float_to_half((float)((double)rh_half_to_float(b[i]) * factor));
    break;
  }
  default: break;
  }
}

/* double to float rounded to odd: truncated toward zero, with the last bit set when inexact.  A
 * float has 13 more bits than a half, so rounding this to half gives the correctly rounded half
 * of the double (a plain double -> float -> half rounds twice and can be one ulp off). */
static float to_float_odd(double d) {
  float f = (float)d;
  if (isfinite(f) && (double)f != d) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if (fabs((double)f) > fabs(d)) b -= 1; /* one step toward zero, in magnitude */
    b |= 1;
    memcpy(&f, &b, sizeof f);
  }
  return f;
}

void rh__to_half(uint16_t *dst, const void *src, size_t count, rh_dtype from) {
  if (from == RH_FLOAT64) {
    const double *s = src;
    for (size_t i = 0; i < count; i++) dst[i] = rh_float_to_half(to_float_odd(s[i]));
  } else {
    const float *s = src;
    for (size_t i = 0; i < count; i++) dst[i] = rh_float_to_half(s[i]);
  }
}

void rh__from_half(void *dst, const uint16_t *src, size_t count, rh_dtype to) {
  if (to == RH_FLOAT64) {
    double *d = dst;
    for (size_t i = 0; i < count; i++) d[i] = rh_half_to_float(src[i]);
  } else {
    float *d = dst;
    for (size_t i = 0; i < count; i++) d[i] = rh_half_to_float(src[i]);
  }
}
