/* Inside the Vulkan backend: the entry points (every one from
 * vkGetInstanceProcAddr of the loader opened at run time), the objects, and
 * the helpers the vk*.c files share. Only gpu/vk*.c include this. */
#ifndef EZ_GPU_VK_IMPL_H
#define EZ_GPU_VK_IMPL_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "gpu.h"
#include "vk_shaders.h"

/* Loader-level entry points (instance NULL). */
#define EZ_VK_GLOBAL_FNS(X)                \
    X(vkCreateInstance)                    \
    X(vkEnumerateInstanceLayerProperties)  \
    X(vkEnumerateInstanceExtensionProperties)

/* Instance-level and device-level entry points. */
#define EZ_VK_INSTANCE_FNS(X)                   \
    X(vkDestroyInstance)                        \
    X(vkEnumeratePhysicalDevices)               \
    X(vkGetPhysicalDeviceProperties)            \
    X(vkGetPhysicalDeviceProperties2)           \
    X(vkGetPhysicalDeviceFeatures2)             \
    X(vkGetPhysicalDeviceQueueFamilyProperties) \
    X(vkGetPhysicalDeviceMemoryProperties)      \
    X(vkEnumerateDeviceExtensionProperties)     \
    X(vkCreateDevice)                           \
    X(vkDestroyDevice)                          \
    X(vkGetDeviceQueue)                         \
    X(vkCreateBuffer)                           \
    X(vkDestroyBuffer)                          \
    X(vkGetBufferMemoryRequirements)            \
    X(vkAllocateMemory)                         \
    X(vkFreeMemory)                             \
    X(vkBindBufferMemory)                       \
    X(vkMapMemory)                              \
    X(vkUnmapMemory)                            \
    X(vkCreateShaderModule)                     \
    X(vkDestroyShaderModule)                    \
    X(vkCreateDescriptorSetLayout)              \
    X(vkDestroyDescriptorSetLayout)             \
    X(vkCreatePipelineLayout)                   \
    X(vkDestroyPipelineLayout)                  \
    X(vkCreateComputePipelines)                 \
    X(vkDestroyPipeline)                        \
    X(vkCreateDescriptorPool)                   \
    X(vkDestroyDescriptorPool)                  \
    X(vkAllocateDescriptorSets)                 \
    X(vkUpdateDescriptorSets)                   \
    X(vkCreateCommandPool)                      \
    X(vkDestroyCommandPool)                     \
    X(vkAllocateCommandBuffers)                 \
    X(vkFreeCommandBuffers)                     \
    X(vkBeginCommandBuffer)                     \
    X(vkEndCommandBuffer)                       \
    X(vkCmdBindPipeline)                        \
    X(vkCmdBindDescriptorSets)                  \
    X(vkCmdPushConstants)                       \
    X(vkCmdDispatch)                            \
    X(vkCmdPipelineBarrier)                     \
    X(vkCmdCopyBuffer)                          \
    X(vkCmdWriteTimestamp)                      \
    X(vkCmdResetQueryPool)                      \
    X(vkCreateQueryPool)                        \
    X(vkDestroyQueryPool)                       \
    X(vkGetQueryPoolResults)                    \
    X(vkCreateFence)                            \
    X(vkDestroyFence)                           \
    X(vkResetFences)                            \
    X(vkWaitForFences)                          \
    X(vkGetFenceStatus)                         \
    X(vkQueueSubmit)                            \
    X(vkDeviceWaitIdle)

#define EZ_VK_DECLARE(name) PFN_##name name;

typedef struct {
    void *lib;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    EZ_VK_GLOBAL_FNS(EZ_VK_DECLARE)
    EZ_VK_INSTANCE_FNS(EZ_VK_DECLARE)
    /* Optional: Vulkan 1.1's instance version query, the debug messenger. */
    PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion;
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT;
} ez_vk_fns;

/* The kernels: one shader each, its bindings and push-constant bytes. */
typedef enum {
    EZ_GPU_K_MV_F32, EZ_GPU_K_MV_F16, EZ_GPU_K_MV_BF16, EZ_GPU_K_MV_Q4_0, EZ_GPU_K_MV_Q4_1, EZ_GPU_K_MV_Q5_0,
    EZ_GPU_K_MV_Q8_0, EZ_GPU_K_MV_Q4_K, EZ_GPU_K_MV_Q5_K, EZ_GPU_K_MV_Q6_K,
    EZ_GPU_K_MM_F32, EZ_GPU_K_MM_F16, EZ_GPU_K_MM_BF16, EZ_GPU_K_MM_Q4_0, EZ_GPU_K_MM_Q4_1, EZ_GPU_K_MM_Q5_0,
    EZ_GPU_K_MM_Q8_0, EZ_GPU_K_MM_Q4_K, EZ_GPU_K_MM_Q5_K, EZ_GPU_K_MM_Q6_K,
    EZ_GPU_K_ATTN_PREFILL,
    EZ_GPU_K_RMS_NORM, EZ_GPU_K_ADD_NORM, EZ_GPU_K_ROPE, EZ_GPU_K_QK_ROPE, EZ_GPU_K_GLU, EZ_GPU_K_SOFTMAX, EZ_GPU_K_ARGMAX,
    EZ_GPU_K_ATTN_F32, EZ_GPU_K_ATTN_F16, EZ_GPU_K_ADD, EZ_GPU_K_SOFTCAP,
    EZ_GPU_K_COUNT
} ez_gpu_kernel;

#define EZ_GPU_MAX_BINDINGS 7
#define EZ_GPU_PUSH_BYTES 128   /* the guaranteed minimum of maxPushConstantsSize */
#define EZ_GPU_WORKGROUP 64     /* specialization constant 0 of every shader but the matvecs */
#define EZ_GPU_MV_WORKGROUP 128 /* the matvecs': several rows per workgroup */
#define EZ_GPU_MM_WORKGROUP 128 /* the matmuls' tiles are written for exactly this many */
#define EZ_GPU_ROW_WORKGROUP 256 /* one-row reductions (rms_norm, softmax, argmax), where the device allows */

typedef struct {
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
    VkPipeline pipeline;
    int n_bindings;
} ez_gpu_pipe;

struct ez_gpu {
    ez_vk_fns vk;
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    VkCommandPool pool;
    VkPhysicalDeviceMemoryProperties mem_props;
    VkPhysicalDeviceLimits limits;
    ez_gpu_device_info info;
    uint64_t max_binding;       /* the limit buffers are held to */
    ez_gpu_pipe pipes[EZ_GPU_K_COUNT];
    uint32_t mv_subgroup;       /* the `_sg` shaders run (the matvecs at lanes >= this); 0: the trees */
    uint32_t mv_workgroup;      /* the matvecs' workgroup: EZ_GPU_MV_WORKGROUP, or $ELIZA_GPU_MV_WG */
    uint32_t mv_lanes_k;        /* at most this many lanes per K-quant row group ($ELIZA_GPU_MV_LANES); 0: no cap */
    int spin_wait;              /* poll the fence instead of sleeping on it (not on CPU devices; $ELIZA_GPU_WAIT) */
    VkFence fence;              /* every submission's, reset before each */
    int timestamps_off;         /* ez_gpu_set_timestamps(g, 0): recordings without them */
    int validation_errors;      /* messages of error severity */
    int validation_reported;    /* errors already turned into a failed call */
    char validation_first[512]; /* the first error message */
};

struct ez_gpu_buf {
    ez_gpu *g;
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint64_t size;      /* bytes, rounded up to 16 */
    ez_gpu_mem mem;
    void *mapped;       /* EZ_GPU_HOST: the persistent mapping */
};

/* A VkResult as an ELIZA_E_* code with "what: VK_ERROR_..." as the message. */
EZ_INTERNAL int32_t ez_vk_fail(VkResult r, const char *what);
EZ_INTERNAL const char *ez_vk_result_name(VkResult r);
/* ELIZA_E_INTERNAL naming the first validation error when new ones arrived. */
EZ_INTERNAL int32_t ez_vk_check_validation(ez_gpu *g);

/* A one-shot command buffer: begin, record, then submit and wait. */
EZ_INTERNAL int32_t ez_vk_oneshot_begin(ez_gpu *g, VkCommandBuffer *cb);
EZ_INTERNAL int32_t ez_vk_oneshot_submit(ez_gpu *g, VkCommandBuffer cb);
EZ_INTERNAL int32_t ez_vk_submit_wait(ez_gpu *g, VkCommandBuffer cb);

/* Records one dispatch of kernel k over bufs with push constants. */
EZ_INTERNAL int32_t ez_gpu_cmd_dispatch(ez_gpu_cmd *c, ez_gpu_kernel k, ez_gpu_buf *const *bufs, int n_bufs,
                                        const void *push, uint32_t push_bytes, uint32_t groups_x,
                                        uint32_t groups_y);
EZ_INTERNAL void ez_gpu_pipes_destroy(ez_gpu *g);

#endif /* EZ_GPU_VK_IMPL_H */
