/* Pipelines from the embedded SPIR-V (made on first use), and command
 * buffers recorded once and replayed: each dispatch gets its own
 * descriptor set, a barrier after the dispatch before it, and timestamps
 * around it when the device has them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "vk_impl.h"

typedef struct {
    const char *shader;
    int n_bindings;
    uint32_t workgroup;
} kernel_desc;

static const kernel_desc KERNELS[EZ_GPU_K_COUNT] = {
#define MV EZ_GPU_MV_WORKGROUP
#define MM EZ_GPU_MM_WORKGROUP
#define ROW EZ_GPU_ROW_WORKGROUP
#define WG EZ_GPU_WORKGROUP
    [EZ_GPU_K_MV_F32] = {"mv_f32", 5, MV},     [EZ_GPU_K_MV_F16] = {"mv_f16", 5, MV},
    [EZ_GPU_K_MV_BF16] = {"mv_bf16", 5, MV},   [EZ_GPU_K_MV_Q4_0] = {"mv_q4_0", 5, MV},
    [EZ_GPU_K_MV_Q4_1] = {"mv_q4_1", 5, MV},   [EZ_GPU_K_MV_Q5_0] = {"mv_q5_0", 5, MV},
    [EZ_GPU_K_MV_Q8_0] = {"mv_q8_0", 5, MV},   [EZ_GPU_K_MV_Q4_K] = {"mv_q4_k", 5, MV},
    [EZ_GPU_K_MV_Q5_K] = {"mv_q5_k", 5, MV},   [EZ_GPU_K_MV_Q6_K] = {"mv_q6_k", 5, MV},
    [EZ_GPU_K_MM_F32] = {"mm_f32", 4, MM},     [EZ_GPU_K_MM_F16] = {"mm_f16", 4, MM},
    [EZ_GPU_K_MM_BF16] = {"mm_bf16", 4, MM},   [EZ_GPU_K_MM_Q4_0] = {"mm_q4_0", 4, MM},
    [EZ_GPU_K_MM_Q4_1] = {"mm_q4_1", 4, MM},   [EZ_GPU_K_MM_Q5_0] = {"mm_q5_0", 4, MM},
    [EZ_GPU_K_MM_Q8_0] = {"mm_q8_0", 4, MM},   [EZ_GPU_K_MM_Q4_K] = {"mm_q4_k", 4, MM},
    [EZ_GPU_K_MM_Q5_K] = {"mm_q5_k", 4, MM},   [EZ_GPU_K_MM_Q6_K] = {"mm_q6_k", 4, MM},
    [EZ_GPU_K_ATTN_PREFILL] = {"attn_prefill", 5, WG},
    [EZ_GPU_K_RMS_NORM] = {"rms_norm", 3, ROW}, [EZ_GPU_K_ADD_NORM] = {"add_norm", 5, ROW},
    [EZ_GPU_K_ROPE] = {"rope", 2, WG},             [EZ_GPU_K_QK_ROPE] = {"qk_rope", 7, WG},
    [EZ_GPU_K_GLU] = {"glu", 2, WG},               [EZ_GPU_K_SOFTMAX] = {"softmax", 1, ROW},
    [EZ_GPU_K_ARGMAX] = {"argmax", 3, ROW},    [EZ_GPU_K_ATTN_F32] = {"attn_f32", 6, WG},
    [EZ_GPU_K_ATTN_F16] = {"attn_f16", 6, WG},
    [EZ_GPU_K_ADD] = {"add", 3, WG},               [EZ_GPU_K_SOFTCAP] = {"softcap", 1, WG},
#undef MV
#undef MM
#undef ROW
#undef WG
};

/* Descriptor sets come from pools of this many, chained as a command
 * buffer records more dispatches. */
#define SETS_PER_POOL 32
/* Dispatches past this many in one command buffer run without timestamps. */
#define MAX_TIMED 1024

struct ez_gpu_cmd {
    ez_gpu *g;
    VkCommandBuffer cb;
    VkDescriptorPool *pools;
    int n_pools, sets_in_last;
    VkQueryPool queries;        /* VK_NULL_HANDLE without timestamps */
    int n_dispatch, ended;
    int overlap_next;           /* ez_gpu_cmd_overlap_next: no barrier before the next op */
    const char **names;         /* [n_dispatch]: each op's shader, or "copy" */
    int names_cap;
    double *last_ms;            /* per timed dispatch, from the last run */
    int n_timed;
};

static const ez_gpu_shader *find_shader(const char *name) {
    int i;
    for (i = 0; i < ez_gpu_n_shaders; i++)
        if (strcmp(ez_gpu_shaders[i].name, name) == 0) return &ez_gpu_shaders[i];
    return NULL;
}

/* The kernels built a second time as NAME_sg with subgroup arithmetic
 * (CMakeLists.txt): the matvecs and the row ops whose workgroup sums and
 * maxima it shortens. */
static int has_subgroup_build(ez_gpu_kernel k) {
    return k <= EZ_GPU_K_MV_Q6_K || k == EZ_GPU_K_ADD_NORM || k == EZ_GPU_K_RMS_NORM || k == EZ_GPU_K_QK_ROPE ||
           k == EZ_GPU_K_ATTN_F32 || k == EZ_GPU_K_ATTN_F16 || k == EZ_GPU_K_ATTN_PREFILL;
}

static int32_t make_pipe_objects(ez_gpu *g, ez_gpu_kernel k) {
    const kernel_desc *kd = &KERNELS[k];
    ez_gpu_pipe *p = &g->pipes[k];
    const int sg = g->mv_subgroup && has_subgroup_build(k);
    char sg_name[32];
    const ez_gpu_shader *sh;
    VkDescriptorSetLayoutBinding binds[EZ_GPU_MAX_BINDINGS];
    VkDescriptorSetLayoutCreateInfo sli = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    VkPushConstantRange push = {VK_SHADER_STAGE_COMPUTE_BIT, 0, EZ_GPU_PUSH_BYTES};
    VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    VkComputePipelineCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    uint32_t workgroup = k <= EZ_GPU_K_MV_Q6_K ? g->mv_workgroup : kd->workgroup;
    VkSpecializationMapEntry spec_entry = {0, 0, sizeof workgroup};
    VkSpecializationInfo spec = {1, &spec_entry, sizeof workgroup, &workgroup};
    VkShaderModule module;
    VkResult r;
    int i;
    snprintf(sg_name, sizeof sg_name, "%s_sg", kd->shader);
    sh = find_shader(sg ? sg_name : kd->shader);
    if (!sh) return ez_fail(ELIZA_E_INTERNAL, "GPU shader '%s' is not in this build", sg ? sg_name : kd->shader);
    /* A power of two within the device's limit (at least 128 everywhere). */
    while (workgroup > EZ_GPU_WORKGROUP && workgroup > g->info.max_workgroup_invocations) workgroup /= 2;
    for (i = 0; i < kd->n_bindings; i++) {
        binds[i].binding = (uint32_t)i;
        binds[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        binds[i].descriptorCount = 1;
        binds[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
        binds[i].pImmutableSamplers = NULL;
    }
    sli.bindingCount = (uint32_t)kd->n_bindings;
    sli.pBindings = binds;
    r = g->vk.vkCreateDescriptorSetLayout(g->device, &sli, NULL, &p->set_layout);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkCreateDescriptorSetLayout");
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &p->set_layout;
    pli.pushConstantRangeCount = 1;
    pli.pPushConstantRanges = &push;
    r = g->vk.vkCreatePipelineLayout(g->device, &pli, NULL, &p->layout);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkCreatePipelineLayout");
    smi.codeSize = sh->bytes;
    smi.pCode = sh->words;
    r = g->vk.vkCreateShaderModule(g->device, &smi, NULL, &module);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkCreateShaderModule");
    cpi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpi.stage.module = module;
    cpi.stage.pName = "main";
    cpi.stage.pSpecializationInfo = &spec;
    cpi.layout = p->layout;
    r = g->vk.vkCreateComputePipelines(g->device, VK_NULL_HANDLE, 1, &cpi, NULL, &p->pipeline);
    g->vk.vkDestroyShaderModule(g->device, module, NULL);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkCreateComputePipelines");
    p->n_bindings = kd->n_bindings;
    return ez_vk_check_validation(g);
}

static void pipe_destroy(ez_gpu *g, ez_gpu_pipe *p) {
    if (p->pipeline) g->vk.vkDestroyPipeline(g->device, p->pipeline, NULL);
    if (p->layout) g->vk.vkDestroyPipelineLayout(g->device, p->layout, NULL);
    if (p->set_layout) g->vk.vkDestroyDescriptorSetLayout(g->device, p->set_layout, NULL);
    memset(p, 0, sizeof *p);
}

/* Kernel k's layouts and pipeline; on failure nothing is left behind. */
static int32_t make_pipe(ez_gpu *g, ez_gpu_kernel k) {
    int32_t rc = make_pipe_objects(g, k);
    if (rc != ELIZA_OK) pipe_destroy(g, &g->pipes[k]);
    return rc;
}

void ez_gpu_pipes_destroy(ez_gpu *g) {
    int k;
    for (k = 0; k < EZ_GPU_K_COUNT; k++) pipe_destroy(g, &g->pipes[k]);
}

int32_t ez_gpu_cmd_begin(ez_gpu *g, ez_gpu_cmd **out) {
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    ez_gpu_cmd *c;
    VkResult r;
    *out = NULL;
    c = (ez_gpu_cmd *)calloc(1, sizeof *c);
    if (!c) return ez_fail(ELIZA_E_NOMEM, "out of memory for a GPU command buffer");
    c->g = g;
    ai.commandPool = g->pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    r = g->vk.vkAllocateCommandBuffers(g->device, &ai, &c->cb);
    if (r != VK_SUCCESS) {
        free(c);
        return ez_vk_fail(r, "vkAllocateCommandBuffers");
    }
    if (g->info.timestamps && !g->timestamps_off) {
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
        qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
        qi.queryCount = 2 * MAX_TIMED;
        r = g->vk.vkCreateQueryPool(g->device, &qi, NULL, &c->queries);
        if (r != VK_SUCCESS) {
            ez_gpu_cmd_free(c);
            return ez_vk_fail(r, "vkCreateQueryPool");
        }
    }
    r = g->vk.vkBeginCommandBuffer(c->cb, &bi);
    if (r != VK_SUCCESS) {
        ez_gpu_cmd_free(c);
        return ez_vk_fail(r, "vkBeginCommandBuffer");
    }
    if (c->queries) g->vk.vkCmdResetQueryPool(c->cb, c->queries, 0, 2 * MAX_TIMED);
    *out = c;
    return ELIZA_OK;
}

static int32_t alloc_set(ez_gpu_cmd *c, VkDescriptorSetLayout layout, VkDescriptorSet *set) {
    ez_gpu *g = c->g;
    VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    VkResult r;
    if (c->n_pools == 0 || c->sets_in_last == SETS_PER_POOL) {
        VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, SETS_PER_POOL * EZ_GPU_MAX_BINDINGS};
        VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
        VkDescriptorPool *pools = (VkDescriptorPool *)realloc(c->pools, (size_t)(c->n_pools + 1) * sizeof *pools);
        if (!pools) return ez_fail(ELIZA_E_NOMEM, "out of memory for GPU descriptor pools");
        c->pools = pools;
        pi.maxSets = SETS_PER_POOL;
        pi.poolSizeCount = 1;
        pi.pPoolSizes = &size;
        r = g->vk.vkCreateDescriptorPool(g->device, &pi, NULL, &c->pools[c->n_pools]);
        if (r != VK_SUCCESS) return ez_vk_fail(r, "vkCreateDescriptorPool");
        c->n_pools++;
        c->sets_in_last = 0;
    }
    ai.descriptorPool = c->pools[c->n_pools - 1];
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &layout;
    r = g->vk.vkAllocateDescriptorSets(g->device, &ai, set);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkAllocateDescriptorSets");
    c->sets_in_last++;
    return ELIZA_OK;
}

/* Before an op (a dispatch or a copy), every write of the ops before it is
 * made visible to it; then the op's opening timestamp. Records its name. */
static int32_t op_begin(ez_gpu_cmd *c, const char *name) {
    ez_gpu *g = c->g;
    if (c->n_dispatch == c->names_cap) {
        const int cap = c->names_cap ? 2 * c->names_cap : 64;
        const char **names = (const char **)realloc(c->names, (size_t)cap * sizeof *names);
        if (!names) return ez_fail(ELIZA_E_NOMEM, "out of memory for a GPU command buffer");
        c->names = names;
        c->names_cap = cap;
    }
    c->names[c->n_dispatch] = name;
    if (c->n_dispatch > 0 && !c->overlap_next) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                           VK_ACCESS_TRANSFER_WRITE_BIT;
        g->vk.vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                                   VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                                   NULL, 0, NULL);
    }
    c->overlap_next = 0;
    if (c->queries && c->n_dispatch < MAX_TIMED)
        g->vk.vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, c->queries, 2 * (uint32_t)c->n_dispatch);
    return ELIZA_OK;
}

void ez_gpu_cmd_overlap_next(ez_gpu_cmd *c) { c->overlap_next = 1; }

/* The op's closing timestamp. */
static void op_end(ez_gpu_cmd *c) {
    if (c->queries && c->n_dispatch < MAX_TIMED)
        c->g->vk.vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->queries,
                                     2 * (uint32_t)c->n_dispatch + 1);
    c->n_dispatch++;
}

int32_t ez_gpu_op_copy(ez_gpu_cmd *c, ez_gpu_buf *src, uint64_t src_off, ez_gpu_buf *dst, uint64_t dst_off,
                       uint64_t bytes) {
    VkBufferCopy region;
    int32_t rc;
    if (c->ended) return ez_fail(ELIZA_E_STATE, "GPU command buffer already ended");
    if (bytes == 0 || src_off > src->size || bytes > src->size - src_off || dst_off > dst->size ||
        bytes > dst->size - dst_off)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU copy of %llu bytes from %llu of %llu to %llu of %llu",
                       (unsigned long long)bytes, (unsigned long long)src_off, (unsigned long long)src->size,
                       (unsigned long long)dst_off, (unsigned long long)dst->size);
    if ((rc = op_begin(c, "copy")) != ELIZA_OK) return rc;
    region.srcOffset = src_off;
    region.dstOffset = dst_off;
    region.size = bytes;
    c->g->vk.vkCmdCopyBuffer(c->cb, src->buffer, dst->buffer, 1, &region);
    op_end(c);
    return ELIZA_OK;
}

int32_t ez_gpu_cmd_dispatch(ez_gpu_cmd *c, ez_gpu_kernel k, ez_gpu_buf *const *bufs, int n_bufs, const void *push,
                            uint32_t push_bytes, uint32_t groups_x, uint32_t groups_y) {
    ez_gpu *g = c->g;
    ez_gpu_pipe *p = &g->pipes[k];
    VkDescriptorBufferInfo infos[EZ_GPU_MAX_BINDINGS];
    VkWriteDescriptorSet writes[EZ_GPU_MAX_BINDINGS];
    VkDescriptorSet set;
    int32_t rc;
    int i;
    if (c->ended) return ez_fail(ELIZA_E_STATE, "GPU command buffer already ended");
    if (push_bytes > EZ_GPU_PUSH_BYTES || groups_x == 0 || groups_y == 0 ||
        groups_x > g->limits.maxComputeWorkGroupCount[0] || groups_y > g->limits.maxComputeWorkGroupCount[1])
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU dispatch of %s: %u x %u groups, %u push bytes", KERNELS[k].shader,
                       groups_x, groups_y, push_bytes);
    if (!p->pipeline && (rc = make_pipe(g, k)) != ELIZA_OK) return rc;
    if (n_bufs != p->n_bindings)
        return ez_fail(ELIZA_E_INTERNAL, "GPU kernel %s takes %d buffers, not %d", KERNELS[k].shader, p->n_bindings,
                       n_bufs);
    if ((rc = alloc_set(c, p->set_layout, &set)) != ELIZA_OK) return rc;
    for (i = 0; i < n_bufs; i++) {
        infos[i].buffer = bufs[i]->buffer;
        infos[i].offset = 0;
        infos[i].range = VK_WHOLE_SIZE;
        memset(&writes[i], 0, sizeof writes[i]);
        writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        writes[i].dstSet = set;
        writes[i].dstBinding = (uint32_t)i;
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
    }
    g->vk.vkUpdateDescriptorSets(g->device, (uint32_t)n_bufs, writes, 0, NULL);
    if ((rc = op_begin(c, KERNELS[k].shader)) != ELIZA_OK) return rc;
    g->vk.vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    g->vk.vkCmdBindDescriptorSets(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
    if (push_bytes) g->vk.vkCmdPushConstants(c->cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    g->vk.vkCmdDispatch(c->cb, groups_x, groups_y, 1);
    op_end(c);
    return ELIZA_OK;
}

int32_t ez_gpu_cmd_end(ez_gpu_cmd *c) {
    ez_gpu *g = c->g;
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    VkResult r;
    if (c->ended) return ez_fail(ELIZA_E_STATE, "GPU command buffer already ended");
    /* Results become visible to readback copies and to the host. */
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT;
    g->vk.vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                               VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0,
                               NULL);
    r = g->vk.vkEndCommandBuffer(c->cb);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkEndCommandBuffer");
    c->ended = 1;
    c->n_timed = c->queries ? EZ_MIN(c->n_dispatch, MAX_TIMED) : 0;
    if (c->n_timed) {
        c->last_ms = (double *)calloc((size_t)c->n_timed, sizeof *c->last_ms);
        if (!c->last_ms) return ez_fail(ELIZA_E_NOMEM, "out of memory for GPU timings");
    }
    return ez_vk_check_validation(g);
}

int32_t ez_gpu_cmd_run(ez_gpu_cmd *c) {
    ez_gpu *g = c->g;
    uint64_t *ts;
    int32_t rc;
    int i;
    VkResult r;
    if (!c->ended) return ez_fail(ELIZA_E_STATE, "GPU command buffer run before it was ended");
    rc = ez_vk_submit_wait(g, c->cb);
    if (rc != ELIZA_OK || c->n_timed == 0) return rc;
    ts = (uint64_t *)malloc((size_t)c->n_timed * 2 * sizeof *ts);
    if (!ts) return ez_fail(ELIZA_E_NOMEM, "out of memory for GPU timestamps");
    r = g->vk.vkGetQueryPoolResults(g->device, c->queries, 0, 2 * (uint32_t)c->n_timed,
                                    (size_t)c->n_timed * 2 * sizeof *ts, ts, sizeof *ts,
                                    VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r == VK_SUCCESS) {
        /* Counters of fewer than 64 bits wrap: the difference modulo their width. */
        const uint64_t mask = g->info.timestamp_bits >= 64 ? UINT64_MAX : (1ull << g->info.timestamp_bits) - 1;
        for (i = 0; i < c->n_timed; i++)
            c->last_ms[i] =
                (double)((ts[2 * i + 1] - ts[2 * i]) & mask) * (double)g->limits.timestampPeriod * 1e-6;
    }
    free(ts);
    return r == VK_SUCCESS ? ELIZA_OK : ez_vk_fail(r, "vkGetQueryPoolResults");
}

int ez_gpu_cmd_timings(const ez_gpu_cmd *c, double *ms, int cap) {
    int i;
    for (i = 0; i < c->n_timed && i < cap; i++) ms[i] = c->last_ms[i];
    return c->n_timed;
}

const char *ez_gpu_cmd_op_name(const ez_gpu_cmd *c, int i) {
    return i >= 0 && i < c->n_dispatch ? c->names[i] : NULL;
}

void ez_gpu_set_timestamps(ez_gpu *g, int on) { g->timestamps_off = !on; }

void ez_gpu_cmd_free(ez_gpu_cmd *c) {
    ez_gpu *g;
    int i;
    if (!c) return;
    g = c->g;
    for (i = 0; i < c->n_pools; i++) g->vk.vkDestroyDescriptorPool(g->device, c->pools[i], NULL);
    if (c->queries) g->vk.vkDestroyQueryPool(g->device, c->queries, NULL);
    if (c->cb) g->vk.vkFreeCommandBuffers(g->device, g->pool, 1, &c->cb);
    free(c->pools);
    free(c->names);
    free(c->last_ms);
    free(c);
}
