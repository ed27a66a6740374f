/*
** dtype_convert.h -- IEEE 16-bit float conversions and rounding to a dtype,
** written out bit by bit (no compiler _Float16 needed). Internal: the
** runtime rounds scalar arguments with them; the test support's CPU
** reference (src/support/reference.h) stores through them.
*/
#ifndef COLLGEN_DTYPE_CONVERT_H
#define COLLGEN_DTYPE_CONVERT_H
#include <stdint.h>

#include "collgen.h"

/* Round-to-nearest-even conversions (NaN stays NaN, overflow -> inf). */
uint16_t collgen__f32_to_bf16(float f);
float collgen__bf16_to_f32(uint16_t h);
uint16_t collgen__f32_to_f16(float f);
float collgen__f16_to_f32(uint16_t h);

/* Rounds f to `dtype` and back: the value a scalar of that dtype really
** holds. An unknown dtype gives NaN (callers validate dtypes first). */
float collgen__dtype_round(collgen_dtype_t dtype, float f);
#endif
