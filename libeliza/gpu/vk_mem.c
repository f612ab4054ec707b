/* Device memory: buffers, staging uploads and readback, weight matrices
 * split at the binding limit. One allocation per buffer. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/quant.h"
#include "vk_impl.h"

/* Staging copies move at most this much per submission. */
#define STAGING_BYTES (16u << 20)

/* The first memory type allowed by `bits` with all of `want`, or UINT32_MAX. */
static uint32_t memory_type(const ez_gpu *g, uint32_t bits, VkMemoryPropertyFlags want) {
    uint32_t i;
    for (i = 0; i < g->mem_props.memoryTypeCount; i++)
        if ((bits & (1u << i)) && (g->mem_props.memoryTypes[i].propertyFlags & want) == want) return i;
    return UINT32_MAX;
}

static const char *mem_name(ez_gpu_mem mem) { return mem == EZ_GPU_HOST ? "host-visible" : "device-local"; }

/* A buffer of any size (staging too), not held to the binding limit. */
static int32_t buf_create(ez_gpu *g, uint64_t bytes, ez_gpu_mem mem, VkBufferUsageFlags usage, ez_gpu_buf **out) {
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    VkMemoryRequirements req;
    VkMemoryPropertyFlags want = mem == EZ_GPU_HOST
                                     ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                     : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    ez_gpu_buf *b;
    uint64_t size = (bytes + 15) & ~(uint64_t)15;
    uint32_t type;
    VkResult r;
    int32_t rc;
    *out = NULL;
    if (bytes == 0 || size < bytes) return ez_fail(ELIZA_E_INVALID_ARG, "GPU buffer of %llu bytes", (unsigned long long)bytes);
    if (mem == EZ_GPU_DEVICE_LOCAL && size > g->info.device_local_bytes)
        return ez_fail(ELIZA_E_NOMEM, "GPU buffer of %llu MiB: the device-local heap of '%s' has %llu MiB",
                       (unsigned long long)(size >> 20), g->info.name,
                       (unsigned long long)(g->info.device_local_bytes >> 20));
    b = (ez_gpu_buf *)calloc(1, sizeof *b);
    if (!b) return ez_fail(ELIZA_E_NOMEM, "out of memory for a GPU buffer");
    b->g = g;
    b->size = size;
    b->mem = mem;
    bci.size = size;
    bci.usage = usage;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    r = g->vk.vkCreateBuffer(g->device, &bci, NULL, &b->buffer);
    if (r != VK_SUCCESS) {
        rc = ez_vk_fail(r, "vkCreateBuffer");
        goto fail;
    }
    g->vk.vkGetBufferMemoryRequirements(g->device, b->buffer, &req);
    type = memory_type(g, req.memoryTypeBits, want);
    if (type == UINT32_MAX) {
        rc = ez_fail(ELIZA_E_UNSUPPORTED, "Vulkan device '%s' has no %s memory for buffers", g->info.name, mem_name(mem));
        goto fail;
    }
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = type;
    r = g->vk.vkAllocateMemory(g->device, &mai, NULL, &b->memory);
    if (r != VK_SUCCESS) {
        rc = ez_vk_fail(r, mem == EZ_GPU_HOST ? "vkAllocateMemory (host-visible)" : "vkAllocateMemory (device-local)");
        goto fail;
    }
    r = g->vk.vkBindBufferMemory(g->device, b->buffer, b->memory, 0);
    if (r == VK_SUCCESS && mem == EZ_GPU_HOST) r = g->vk.vkMapMemory(g->device, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped);
    if (r != VK_SUCCESS) {
        rc = ez_vk_fail(r, "vkBindBufferMemory / vkMapMemory");
        goto fail;
    }
    *out = b;
    return ELIZA_OK;
fail:
    ez_gpu_buf_free(b);
    return rc;
}

int32_t ez_gpu_buf_create(ez_gpu *g, uint64_t bytes, ez_gpu_mem mem, ez_gpu_buf **out) {
    *out = NULL;
    if (bytes > g->max_binding)
        return ez_fail(ELIZA_E_UNSUPPORTED, "GPU buffer of %llu bytes passes the binding limit of %llu bytes of '%s'",
                       (unsigned long long)bytes, (unsigned long long)g->max_binding, g->info.name);
    return buf_create(g, bytes, mem,
                      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                          VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                      out);
}

void ez_gpu_buf_free(ez_gpu_buf *b) {
    if (!b) return;
    if (b->mapped) b->g->vk.vkUnmapMemory(b->g->device, b->memory);
    if (b->buffer) b->g->vk.vkDestroyBuffer(b->g->device, b->buffer, NULL);
    if (b->memory) b->g->vk.vkFreeMemory(b->g->device, b->memory, NULL);
    free(b);
}

uint64_t ez_gpu_buf_size(const ez_gpu_buf *b) { return b->size; }

static int32_t check_range(const ez_gpu_buf *b, uint64_t offset, uint64_t n) {
    if (offset > b->size || n > b->size - offset)
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU transfer of %llu bytes at %llu passes the buffer's %llu",
                       (unsigned long long)n, (unsigned long long)offset, (unsigned long long)b->size);
    return ELIZA_OK;
}

/* Copies between a staging buffer and b, making the result visible to the
 * compute shaders (upload) or to the host (download). */
static int32_t staged_copy(ez_gpu *g, VkBuffer src, uint64_t src_off, VkBuffer dst, uint64_t dst_off, uint64_t n,
                           int upload) {
    VkCommandBuffer cb;
    VkBufferCopy region;
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    int32_t rc = ez_vk_oneshot_begin(g, &cb);
    if (rc != ELIZA_OK) return rc;
    region.srcOffset = src_off;
    region.dstOffset = dst_off;
    region.size = n;
    g->vk.vkCmdCopyBuffer(cb, src, dst, 1, &region);
    mb.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = upload ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT : VK_ACCESS_HOST_READ_BIT;
    g->vk.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                               upload ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                               0, NULL, 0, NULL);
    return ez_vk_oneshot_submit(g, cb);
}

/* Host memory to b (upload) or b to host memory, through b's mapping or a
 * staging buffer. */
static int32_t transfer(const ez_gpu_buf *b, uint64_t offset, uint8_t *host, uint64_t n, int upload) {
    ez_gpu *g = b->g;
    ez_gpu_buf *stage;
    uint64_t done;
    int32_t rc = check_range(b, offset, n);
    if (rc != ELIZA_OK || n == 0) return rc;
    if (b->mapped) {
        uint8_t *dev = (uint8_t *)b->mapped + offset;
        memcpy(upload ? dev : host, upload ? host : dev, (size_t)n);
        return ELIZA_OK;
    }
    rc = buf_create(g, EZ_MIN(n, STAGING_BYTES), EZ_GPU_HOST,
                    upload ? VK_BUFFER_USAGE_TRANSFER_SRC_BIT : VK_BUFFER_USAGE_TRANSFER_DST_BIT, &stage);
    for (done = 0; rc == ELIZA_OK && done < n; done += STAGING_BYTES) {
        const uint64_t len = EZ_MIN(n - done, STAGING_BYTES);
        if (upload) {
            memcpy(stage->mapped, host + done, (size_t)len);
            rc = staged_copy(g, stage->buffer, 0, b->buffer, offset + done, len, 1);
        } else {
            rc = staged_copy(g, b->buffer, offset + done, stage->buffer, 0, len, 0);
            if (rc == ELIZA_OK) memcpy(host + done, stage->mapped, (size_t)len);
        }
    }
    ez_gpu_buf_free(stage);
    return rc;
}

int32_t ez_gpu_upload(ez_gpu_buf *b, uint64_t offset, const void *src, uint64_t n) {
    /* transfer() only reads host memory on the way up. */
    return transfer(b, offset, (uint8_t *)(uintptr_t)src, n, 1);
}

int32_t ez_gpu_download(const ez_gpu_buf *b, uint64_t offset, void *dst, uint64_t n) {
    return transfer(b, offset, (uint8_t *)dst, n, 0);
}

/* ---- weight matrices ----------------------------------------------------------------- */

int ez_gpu_has_matvec(uint32_t type) {
    switch (type) {
    case EZ_TYPE_F32:
    case EZ_TYPE_F16:
    case EZ_TYPE_BF16:
    case EZ_TYPE_Q4_0:
    case EZ_TYPE_Q4_1:
    case EZ_TYPE_Q5_0:
    case EZ_TYPE_Q8_0:
    case EZ_TYPE_Q4_K:
    case EZ_TYPE_Q5_K:
    case EZ_TYPE_Q6_K: return 1;
    default: return 0;
    }
}

/* The rows of a matrix into its parts: n_rows of data (b NULL), or with b,
 * n_rows of a and of b interleaved (a's row i at 2 i, b's at 2 i + 1), each
 * part then holding whole pairs. */
static int32_t matrix_upload(ez_gpu *g, uint32_t type, int64_t n_rows, int64_t n_cols, const void *a, const void *b,
                             ez_gpu_matrix *out) {
    const ez_type_traits *tr = ez_type_traits_of(type);
    const int paired = b != NULL;
    uint64_t row_bytes = n_cols > 0 ? ez_row_bytes(type, (uint64_t)n_cols) : 0;
    int64_t rows_per_part, r0, total;
    uint8_t *pairs = NULL;
    int32_t rc = ELIZA_OK;
    int i;
    memset(out, 0, sizeof *out);
    if (!tr || !ez_gpu_has_matvec(type))
        return ez_fail(ELIZA_E_UNSUPPORTED, "no GPU matrix kernel for weight type %s", tr ? tr->name : "(unknown)");
    if (n_rows <= 0 || row_bytes == 0 || n_cols > UINT32_MAX || n_rows > (paired ? UINT32_MAX / 2 : UINT32_MAX))
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU matrix [%lld, %lld] of %s", (long long)n_rows, (long long)n_cols,
                       tr->name);
    total = paired ? 2 * n_rows : n_rows;
    if ((uint64_t)total > g->info.device_local_bytes / row_bytes)
        return ez_fail(ELIZA_E_NOMEM, "GPU matrix [%lld, %lld] of %s: %llu MiB past the device-local heap of '%s' (%llu MiB)",
                       (long long)total, (long long)n_cols, tr->name,
                       (unsigned long long)(((uint64_t)total * row_bytes) >> 20), g->info.name,
                       (unsigned long long)(g->info.device_local_bytes >> 20));
    rows_per_part = (int64_t)(g->max_binding / row_bytes);
    /* Parts start at even rows: a pair's (and a rope pair's) rows share one. */
    if (paired || rows_per_part > 1) rows_per_part &= ~(int64_t)1;
    if (rows_per_part == 0)
        return ez_fail(ELIZA_E_UNSUPPORTED, "%s %s row%s of %lld elements (%llu bytes) pass%s the binding limit of %llu bytes",
                       paired ? "two" : "a", tr->name, paired ? "s" : "", (long long)n_cols,
                       (unsigned long long)row_bytes, paired ? "" : "es", (unsigned long long)g->max_binding);
    out->type = type;
    out->n_rows = total;
    out->n_cols = n_cols;
    out->row_bytes = row_bytes;
    out->paired = paired;
    out->n_parts = (int)((total + rows_per_part - 1) / rows_per_part);
    out->parts = (ez_gpu_buf **)calloc((size_t)out->n_parts, sizeof *out->parts);
    out->part_row0 = (int64_t *)calloc((size_t)out->n_parts + 1, sizeof *out->part_row0);
    if (paired) pairs = (uint8_t *)malloc((size_t)(EZ_MIN(rows_per_part, total) * (int64_t)row_bytes));
    if (!out->parts || !out->part_row0 || (paired && !pairs)) {
        free(pairs);
        ez_gpu_matrix_free(out);
        return ez_fail(ELIZA_E_NOMEM, "out of memory for a GPU matrix");
    }
    for (i = 0, r0 = 0; i < out->n_parts && rc == ELIZA_OK; i++, r0 += rows_per_part) {
        const int64_t rows = EZ_MIN(rows_per_part, total - r0);
        const uint8_t *src = (const uint8_t *)a + (uint64_t)r0 * row_bytes;
        out->part_row0[i] = r0;
        if (paired) {
            for (int64_t r = 0; r < rows; r++)
                memcpy(pairs + (uint64_t)r * row_bytes,
                       (const uint8_t *)(r % 2 ? b : a) + (uint64_t)((r0 + r) / 2) * row_bytes, (size_t)row_bytes);
            src = pairs;
        }
        rc = ez_gpu_buf_create(g, (uint64_t)rows * row_bytes, EZ_GPU_DEVICE_LOCAL, &out->parts[i]);
        if (rc == ELIZA_OK) rc = ez_gpu_upload(out->parts[i], 0, src, (uint64_t)rows * row_bytes);
    }
    free(pairs);
    out->part_row0[out->n_parts] = total;
    if (rc != ELIZA_OK) ez_gpu_matrix_free(out);
    return rc;
}

int32_t ez_gpu_matrix_upload(ez_gpu *g, uint32_t type, int64_t n_rows, int64_t n_cols, const void *data,
                             ez_gpu_matrix *out) {
    return matrix_upload(g, type, n_rows, n_cols, data, NULL, out);
}

int32_t ez_gpu_matrix_upload_pair(ez_gpu *g, uint32_t type, int64_t n_rows, int64_t n_cols, const void *a,
                                  const void *b, ez_gpu_matrix *out) {
    if (!a || !b) {
        memset(out, 0, sizeof *out);
        return ez_fail(ELIZA_E_INVALID_ARG, "GPU matrix pair without both matrices");
    }
    return matrix_upload(g, type, n_rows, n_cols, a, b, out);
}

void ez_gpu_matrix_free(ez_gpu_matrix *m) {
    int i;
    if (m->parts)
        for (i = 0; i < m->n_parts; i++) ez_gpu_buf_free(m->parts[i]);
    free(m->parts);
    free(m->part_row0);
    memset(m, 0, sizeof *m);
}
