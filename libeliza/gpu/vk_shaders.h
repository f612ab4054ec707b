/* The SPIR-V modules compiled from the .comp files under gpu/shaders at build
 * time and embedded by cmake/embed_spirv.cmake (the generated eliza_shaders.c). */
#ifndef EZ_GPU_VK_SHADERS_H
#define EZ_GPU_VK_SHADERS_H

#include "core/common.h"

typedef struct {
    const char *name;       /* the .comp file's name without extension */
    const uint32_t *words;
    size_t bytes;
} ez_gpu_shader;

EZ_INTERNAL extern const ez_gpu_shader ez_gpu_shaders[];
EZ_INTERNAL extern const int ez_gpu_n_shaders;

#endif /* EZ_GPU_VK_SHADERS_H */
