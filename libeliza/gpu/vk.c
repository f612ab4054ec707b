/* The Vulkan loader, instance, device choice and the capabilities report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/platform.h"
#include "vk_impl.h"

#if defined(_WIN32)
static const char *const LOADER_NAMES[] = {"vulkan-1.dll"};
#elif defined(__APPLE__)
static const char *const LOADER_NAMES[] = {"libvulkan.1.dylib", "libMoltenVK.dylib"};
#else
static const char *const LOADER_NAMES[] = {"libvulkan.so.1", "libvulkan.so"};
#endif

static const char VALIDATION_LAYER[] = "VK_LAYER_KHRONOS_validation";

const char *ez_vk_result_name(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_INCOMPLETE: return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VK_ERROR_UNKNOWN";
    }
}

int32_t ez_vk_fail(VkResult r, const char *what) {
    int32_t code = ELIZA_E_INTERNAL;
    switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_FRAGMENTED_POOL:
    case VK_ERROR_TOO_MANY_OBJECTS: code = ELIZA_E_NOMEM; break;
    case VK_ERROR_INITIALIZATION_FAILED:
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT:
    case VK_ERROR_INCOMPATIBLE_DRIVER: code = ELIZA_E_UNSUPPORTED; break;
    default: break;
    }
    return ez_fail(code, "Vulkan: %s failed: %s (%d)", what, ez_vk_result_name(r), (int)r);
}

int32_t ez_vk_check_validation(ez_gpu *g) {
    if (g->validation_errors == g->validation_reported) return ELIZA_OK;
    g->validation_reported = g->validation_errors;
    return ez_fail(ELIZA_E_INTERNAL, "Vulkan validation: %d error(s), the first: %s", g->validation_errors,
                   g->validation_first);
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                    VkDebugUtilsMessageTypeFlagsEXT types,
                                                    const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                    void *user) {
    ez_gpu *g = (ez_gpu *)user;
    const char *msg = data && data->pMessage ? data->pMessage : "(no message)";
    (void)types;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        if (g->validation_errors++ == 0) snprintf(g->validation_first, sizeof g->validation_first, "%s", msg);
        ez_log(ELIZA_LOG_ERROR, "Vulkan validation: %s", msg);
    } else {
        ez_log(ELIZA_LOG_WARN, "Vulkan validation: %s", msg);
    }
    return VK_FALSE;
}

/* ---- loader and instance ------------------------------------------------------------ */

static int32_t load_loader(ez_vk_fns *vk) {
    size_t i;
    memset(vk, 0, sizeof *vk);
    for (i = 0; i < sizeof LOADER_NAMES / sizeof LOADER_NAMES[0] && !vk->lib; i++) vk->lib = ez_dlopen(LOADER_NAMES[i]);
    if (!vk->lib) return ez_fail(ELIZA_E_UNSUPPORTED, "no Vulkan loader (%s not found)", LOADER_NAMES[0]);
    vk->vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)ez_dlsym(vk->lib, "vkGetInstanceProcAddr");
    if (!vk->vkGetInstanceProcAddr) {
        ez_dlclose(vk->lib);
        vk->lib = NULL;
        return ez_fail(ELIZA_E_UNSUPPORTED, "the Vulkan loader %s has no vkGetInstanceProcAddr", LOADER_NAMES[0]);
    }
#define EZ_VK_LOAD_GLOBAL(name) vk->name = (PFN_##name)vk->vkGetInstanceProcAddr(NULL, #name);
    EZ_VK_GLOBAL_FNS(EZ_VK_LOAD_GLOBAL)
#undef EZ_VK_LOAD_GLOBAL
    vk->vkEnumerateInstanceVersion =
        (PFN_vkEnumerateInstanceVersion)vk->vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
    if (!vk->vkCreateInstance || !vk->vkEnumerateInstanceLayerProperties ||
        !vk->vkEnumerateInstanceExtensionProperties) {
        ez_dlclose(vk->lib);
        vk->lib = NULL;
        return ez_fail(ELIZA_E_UNSUPPORTED, "the Vulkan loader lacks its global entry points");
    }
    return ELIZA_OK;
}

static int layer_present(ez_vk_fns *vk, const char *name) {
    uint32_t n = 0, i;
    VkLayerProperties *props;
    int found = 0;
    if (vk->vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return 0;
    props = (VkLayerProperties *)calloc(n, sizeof *props);
    if (!props) return 0;
    if (vk->vkEnumerateInstanceLayerProperties(&n, props) == VK_SUCCESS)
        for (i = 0; i < n; i++) found |= strcmp(props[i].layerName, name) == 0;
    free(props);
    return found;
}

static int instance_extension_present(ez_vk_fns *vk, const char *layer, const char *name) {
    uint32_t n = 0, i;
    VkExtensionProperties *props;
    int found = 0;
    if (vk->vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    props = (VkExtensionProperties *)calloc(n, sizeof *props);
    if (!props) return 0;
    if (vk->vkEnumerateInstanceExtensionProperties(layer, &n, props) == VK_SUCCESS)
        for (i = 0; i < n; i++) found |= strcmp(props[i].extensionName, name) == 0;
    free(props);
    return found;
}

/* Creates the instance (Vulkan 1.1) and loads the instance-level entry
 * points. With user != NULL and validation, the layer's messages reach
 * on_validation(user). */
static int32_t create_instance(ez_vk_fns *vk, int validation, ez_gpu *user, VkInstance *inst,
                               VkDebugUtilsMessengerEXT *messenger) {
    uint32_t version = VK_API_VERSION_1_0;
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    VkDebugUtilsMessengerCreateInfoEXT dci = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    const char *layers[1] = {VALIDATION_LAYER};
    const char *exts[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
    VkResult r;
    if (vk->vkEnumerateInstanceVersion) vk->vkEnumerateInstanceVersion(&version);
    if (version < VK_API_VERSION_1_1)
        return ez_fail(ELIZA_E_UNSUPPORTED, "the Vulkan loader offers %u.%u; libeliza needs 1.1",
                       VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
    app.pApplicationName = "libeliza";
    app.pEngineName = "libeliza";
    app.apiVersion = VK_API_VERSION_1_1;
    ci.pApplicationInfo = &app;
    if (validation) {
        if (!layer_present(vk, VALIDATION_LAYER))
            return ez_fail(ELIZA_E_UNSUPPORTED, "Vulkan validation asked for, but %s is not installed",
                           VALIDATION_LAYER);
        if (!instance_extension_present(vk, VALIDATION_LAYER, exts[0]) &&
            !instance_extension_present(vk, NULL, exts[0]))
            return ez_fail(ELIZA_E_UNSUPPORTED, "Vulkan validation asked for, but %s is missing", exts[0]);
        ci.enabledLayerCount = 1;
        ci.ppEnabledLayerNames = layers;
        ci.enabledExtensionCount = 1;
        ci.ppEnabledExtensionNames = exts;
        dci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
        dci.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
        dci.pfnUserCallback = on_validation;
        dci.pUserData = user;
        ci.pNext = &dci; /* messages of vkCreateInstance itself */
    }
    r = vk->vkCreateInstance(&ci, NULL, inst);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkCreateInstance");
#define EZ_VK_LOAD_INSTANCE(name) vk->name = (PFN_##name)vk->vkGetInstanceProcAddr(*inst, #name);
    EZ_VK_INSTANCE_FNS(EZ_VK_LOAD_INSTANCE)
#undef EZ_VK_LOAD_INSTANCE
#define EZ_VK_CHECK_LOADED(name) || !vk->name
    if (0 EZ_VK_INSTANCE_FNS(EZ_VK_CHECK_LOADED)) {
#undef EZ_VK_CHECK_LOADED
        PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)vk->vkGetInstanceProcAddr(*inst, "vkDestroyInstance");
        if (destroy) destroy(*inst, NULL);
        *inst = VK_NULL_HANDLE;
        return ez_fail(ELIZA_E_UNSUPPORTED, "the Vulkan instance lacks Vulkan 1.1 entry points");
    }
    if (validation) {
        vk->vkCreateDebugUtilsMessengerEXT = (PFN_vkCreateDebugUtilsMessengerEXT)vk->vkGetInstanceProcAddr(
            *inst, "vkCreateDebugUtilsMessengerEXT");
        vk->vkDestroyDebugUtilsMessengerEXT = (PFN_vkDestroyDebugUtilsMessengerEXT)vk->vkGetInstanceProcAddr(
            *inst, "vkDestroyDebugUtilsMessengerEXT");
        dci.pNext = NULL;
        r = vk->vkCreateDebugUtilsMessengerEXT ? vk->vkCreateDebugUtilsMessengerEXT(*inst, &dci, NULL, messenger)
                                               : VK_ERROR_EXTENSION_NOT_PRESENT;
        if (r != VK_SUCCESS) {
            vk->vkDestroyInstance(*inst, NULL);
            *inst = VK_NULL_HANDLE;
            return ez_vk_fail(r, "vkCreateDebugUtilsMessengerEXT");
        }
    }
    return ELIZA_OK;
}

/* ---- devices ------------------------------------------------------------------------ */

static int device_extension_present(ez_vk_fns *vk, VkPhysicalDevice pd, const char *name) {
    uint32_t n = 0, i;
    VkExtensionProperties *props;
    int found = 0;
    if (vk->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) return 0;
    props = (VkExtensionProperties *)calloc(n, sizeof *props);
    if (!props) return 0;
    if (vk->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, props) == VK_SUCCESS)
        for (i = 0; i < n; i++) found |= strcmp(props[i].extensionName, name) == 0;
    free(props);
    return found;
}

/* The first queue family with compute, or UINT32_MAX; *timestamp_bits from it. */
static uint32_t compute_family(ez_vk_fns *vk, VkPhysicalDevice pd, uint32_t *timestamp_bits) {
    VkQueueFamilyProperties fam[16];
    uint32_t n = 16, i;
    vk->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, fam);
    for (i = 0; i < n; i++) {
        if (!(fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        *timestamp_bits = fam[i].timestampValidBits;
        return i;
    }
    return UINT32_MAX;
}

static const char *type_name(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

/* Reads what the device offers into *info; returns the compute queue
 * family (UINT32_MAX: none, or not Vulkan 1.1). */
static uint32_t describe(ez_vk_fns *vk, VkPhysicalDevice pd, ez_gpu_device_info *info) {
    VkPhysicalDeviceProperties base;
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceShaderIntegerDotProductProperties dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDeviceMemoryProperties mem;
    uint32_t i, family;
    int has_12, has_dot;
    memset(info, 0, sizeof *info);
    vk->vkGetPhysicalDeviceProperties(pd, &base);
    snprintf(info->name, sizeof info->name, "%s", base.deviceName);
    info->type = type_name(base.deviceType);
    info->vendor_id = base.vendorID;
    info->device_id = base.deviceID;
    info->api_version = base.apiVersion;
    info->driver_version = base.driverVersion;
    info->max_binding_bytes = base.limits.maxStorageBufferRange;
    info->max_workgroup_invocations = base.limits.maxComputeWorkGroupInvocations;
    if (base.apiVersion < VK_API_VERSION_1_1) return UINT32_MAX;
    has_12 = base.apiVersion >= VK_API_VERSION_1_2;
    has_dot = base.apiVersion >= VK_API_VERSION_1_3 ||
              device_extension_present(vk, pd, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    p2.pNext = &sub;
    if (has_12) {
        sub.pNext = &drv;
        if (has_dot) drv.pNext = &dot;
    } else if (has_dot) {
        sub.pNext = &dot;
    }
    vk->vkGetPhysicalDeviceProperties2(pd, &p2);
    info->subgroup_size = sub.subgroupSize;
    info->subgroup_arith = (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                           (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
    if (has_12) snprintf(info->driver, sizeof info->driver, "%.120s %.120s", drv.driverName, drv.driverInfo);
    info->int8_dot = has_dot && dot.integerDotProduct4x8BitPackedSignedAccelerated;
    if (has_12 || device_extension_present(vk, pd, VK_KHR_SHADER_FLOAT16_INT8_EXTENSION_NAME)) {
        f2.pNext = &f16;
        vk->vkGetPhysicalDeviceFeatures2(pd, &f2);
        info->fp16 = f16.shaderFloat16 != 0;
        info->int8 = f16.shaderInt8 != 0;
    }
    info->cooperative_matrix = device_extension_present(vk, pd, "VK_KHR_cooperative_matrix");
    vk->vkGetPhysicalDeviceMemoryProperties(pd, &mem);
    for (i = 0; i < mem.memoryHeapCount; i++)
        if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            info->device_local_bytes = EZ_MAX(info->device_local_bytes, mem.memoryHeaps[i].size);
    family = compute_family(vk, pd, &info->timestamp_bits);
    info->timestamps = info->timestamp_bits > 0 && base.limits.timestampPeriod > 0.0f;
    return family;
}

static int contains_nocase(const char *hay, const char *needle, size_t n) {
    size_t i, j;
    if (n == 0) return 0;
    for (i = 0; hay[i]; i++) {
        for (j = 0; j < n && hay[i + j]; j++) {
            char a = hay[i + j], b = needle[j];
            if (a >= 'A' && a <= 'Z') a = (char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z') b = (char)(b - 'A' + 'a');
            if (a != b) break;
        }
        if (j == n) return 1;
    }
    return 0;
}

/* The entry of a comma-separated list that names this device (a substring
 * of its name or driver), as "entry" in *entry, or 0. */
static int denied_by(const char *list, const ez_gpu_device_info *info, char *entry, size_t cap) {
    const char *p = list;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (contains_nocase(info->name, p, n) || contains_nocase(info->driver, p, n)) {
            snprintf(entry, cap, "%.*s", (int)n, p);
            return 1;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* ELIZA_E_UNSUPPORTED when the device is denylisted: drivers known to
 * compute wrong results are named through $ELIZA_GPU_DENY (or the test
 * hook), matched against the device and driver names. */
static int32_t check_denylist(const ez_gpu_device_info *info, const char *extra) {
    char entry[128];
    const char *env = getenv("ELIZA_GPU_DENY");
    if (denied_by(env, info, entry, sizeof entry) || denied_by(extra, info, entry, sizeof entry))
        return ez_fail(ELIZA_E_UNSUPPORTED, "Vulkan device '%s' (driver '%s') is denylisted ('%s')", info->name,
                       info->driver, entry);
    return ELIZA_OK;
}

static int type_rank(const char *type) {
    if (strcmp(type, "discrete") == 0) return 4;
    if (strcmp(type, "integrated") == 0) return 3;
    if (strcmp(type, "virtual") == 0) return 2;
    return strcmp(type, "cpu") == 0 ? 1 : 0;
}

static int is_index(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* Nonzero when the ELIZA_GPU_DEVICE-style choice `want` names device i. */
static int names_device(const char *want, uint32_t i, const ez_gpu_device_info *info) {
    if (!want || !*want) return 0;
    if (is_index(want)) return (uint32_t)atoi(want) == i;
    return contains_nocase(info->name, want, strlen(want));
}

static int32_t choose_device(ez_gpu *g, const ez_gpu_params *p, uint32_t *family) {
    const char *want = p->device ? p->device : getenv("ELIZA_GPU_DEVICE");
    VkPhysicalDevice devs[16];
    uint32_t n = 16, i, best = UINT32_MAX, best_family = UINT32_MAX;
    int best_rank = -1;
    VkResult r;
    if (!want) want = "";
    if (strcmp(want, "none") == 0) return ez_fail(ELIZA_E_UNSUPPORTED, "GPU disabled (device \"none\")");
    r = g->vk.vkEnumeratePhysicalDevices(g->instance, &n, devs);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return ez_vk_fail(r, "vkEnumeratePhysicalDevices");
    if (n == 0) return ez_fail(ELIZA_E_UNSUPPORTED, "no Vulkan device");
    for (i = 0; i < n; i++) {
        ez_gpu_device_info info;
        uint32_t fam = describe(&g->vk, devs[i], &info);
        int rank = type_rank(info.type);
        if (*want) {
            if (!names_device(want, i, &info)) continue;
        } else if (rank == 1 && !p->allow_cpu) {
            continue;
        }
        if (fam == UINT32_MAX) {
            if (*want) return ez_fail(ELIZA_E_UNSUPPORTED, "Vulkan device '%s' has no Vulkan 1.1 compute queue", info.name);
            continue;
        }
        if (rank > best_rank) {
            best = i;
            best_rank = rank;
            best_family = fam;
            g->info = info;
        }
        if (*want) break;
    }
    if (best == UINT32_MAX) {
        if (*want) return ez_fail(ELIZA_E_NOT_FOUND, "no Vulkan device matches \"%s\" (%u device(s))", want, n);
        return ez_fail(ELIZA_E_UNSUPPORTED, "no Vulkan GPU with compute (%u device(s); CPU devices only when "
                       "named, e.g. ELIZA_GPU_DEVICE=llvmpipe)", n);
    }
    g->phys = devs[best];
    *family = best_family;
    return check_denylist(&g->info, p->deny);
}

static int32_t create_device(ez_gpu *g, uint32_t family) {
    const float prio = 1.0f;
    VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    VkPhysicalDeviceProperties props;
    VkResult r;
    q.queueFamilyIndex = family;
    q.queueCount = 1;
    q.pQueuePriorities = &prio;
    ci.queueCreateInfoCount = 1;
    ci.pQueueCreateInfos = &q;
    r = g->vk.vkCreateDevice(g->phys, &ci, NULL, &g->device);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkCreateDevice");
    g->queue_family = family;
    g->vk.vkGetDeviceQueue(g->device, family, 0, &g->queue);
    g->vk.vkGetPhysicalDeviceMemoryProperties(g->phys, &g->mem_props);
    g->vk.vkGetPhysicalDeviceProperties(g->phys, &props);
    g->limits = props.limits;
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = family;
    r = g->vk.vkCreateCommandPool(g->device, &pci, NULL, &g->pool);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkCreateCommandPool");
    return ELIZA_OK;
}

void ez_gpu_params_default(ez_gpu_params *p) { memset(p, 0, sizeof *p); }

/* $name as a power of two in [lo, hi], else dflt (unset or out of range). */
static uint32_t env_pow2(const char *name, uint32_t lo, uint32_t hi, uint32_t dflt) {
    const char *e = getenv(name);
    const long v = e ? strtol(e, NULL, 10) : 0;
    if (v < (long)lo || v > (long)hi || (v & (v - 1)) != 0) return dflt;
    return (uint32_t)v;
}

int32_t ez_gpu_open(const ez_gpu_params *params, ez_gpu **out) {
    ez_gpu_params p;
    ez_gpu *g;
    uint32_t family = 0;
    int32_t rc;
    *out = NULL;
    if (params) {
        p = *params;
    } else {
        ez_gpu_params_default(&p);
    }
    p.validation = p.validation || ez_env_flag("ELIZA_GPU_VALIDATION");
    g = (ez_gpu *)calloc(1, sizeof *g);
    if (!g) return ez_fail(ELIZA_E_NOMEM, "out of memory for the GPU context");
    rc = load_loader(&g->vk);
    if (rc == ELIZA_OK) rc = create_instance(&g->vk, p.validation, g, &g->instance, &g->messenger);
    if (rc == ELIZA_OK) rc = choose_device(g, &p, &family);
    if (rc == ELIZA_OK) rc = create_device(g, family);
    if (rc == ELIZA_OK) rc = ez_vk_check_validation(g);
    if (rc != ELIZA_OK) {
        ez_gpu_close(g);
        return rc;
    }
    g->max_binding = g->info.max_binding_bytes;
    if (p.max_binding_bytes && p.max_binding_bytes < g->max_binding) g->max_binding = p.max_binding_bytes;
    /* Tuning switches of the matvecs (docs/gpu.md): their workgroup, and a
     * cap on the lanes of a K-quant row group. */
    g->mv_workgroup = env_pow2("ELIZA_GPU_MV_WG", 64u, 256u, EZ_GPU_MV_WORKGROUP);
    if (g->mv_workgroup > g->info.max_workgroup_invocations) g->mv_workgroup = EZ_GPU_MV_WORKGROUP;
    g->mv_lanes_k = env_pow2("ELIZA_GPU_MV_LANES", 4u, 256u, 0u);
    /* A GPU's fence is polled (its wake-up after a sleep costs more than a
     * step's last kernels); a CPU device's is slept on, leaving it the cores. */
    {
        const char *w = getenv("ELIZA_GPU_WAIT");
        g->spin_wait = w && strcmp(w, "block") == 0  ? 0
                       : w && strcmp(w, "spin") == 0 ? 1
                                                     : strcmp(g->info.type, "cpu") != 0;
    }
    {
        VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        const VkResult r = g->vk.vkCreateFence(g->device, &fci, NULL, &g->fence);
        if (r != VK_SUCCESS) {
            ez_gpu_close(g);
            return ez_vk_fail(r, "vkCreateFence");
        }
    }
    /* The `_sg` builds (matvecs, row ops) where the device has subgroup arithmetic
     * and a power-of-two subgroup no wider than their workgroup. */
    if (g->info.subgroup_arith && !p.no_subgroup && !ez_env_flag("ELIZA_GPU_NO_SUBGROUP") &&
        g->info.subgroup_size >= 4 && g->info.subgroup_size <= g->mv_workgroup &&
        (g->info.subgroup_size & (g->info.subgroup_size - 1)) == 0)
        g->mv_subgroup = g->info.subgroup_size;
    ez_log(ELIZA_LOG_INFO, "GPU: Vulkan device '%s' (%s, driver %s)%s%s", g->info.name, g->info.type, g->info.driver,
           p.validation ? ", validation on" : "", g->mv_subgroup ? ", subgroup reductions" : "");
    *out = g;
    return ELIZA_OK;
}

void ez_gpu_close(ez_gpu *g) {
    if (!g) return;
    if (g->device) {
        g->vk.vkDeviceWaitIdle(g->device);
        ez_gpu_pipes_destroy(g);
        if (g->fence) g->vk.vkDestroyFence(g->device, g->fence, NULL);
        if (g->pool) g->vk.vkDestroyCommandPool(g->device, g->pool, NULL);
        g->vk.vkDestroyDevice(g->device, NULL);
    }
    if (g->messenger) g->vk.vkDestroyDebugUtilsMessengerEXT(g->instance, g->messenger, NULL);
    if (g->instance) g->vk.vkDestroyInstance(g->instance, NULL);
    if (g->vk.lib) ez_dlclose(g->vk.lib);
    free(g);
}

const ez_gpu_device_info *ez_gpu_info(const ez_gpu *g) { return &g->info; }

int ez_gpu_validation_errors(const ez_gpu *g) { return g->validation_errors; }

/* ---- one-shot submissions ----------------------------------------------------------- */

int32_t ez_vk_oneshot_begin(ez_gpu *g, VkCommandBuffer *cb) {
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VkResult r;
    ai.commandPool = g->pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    r = g->vk.vkAllocateCommandBuffers(g->device, &ai, cb);
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkAllocateCommandBuffers");
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    r = g->vk.vkBeginCommandBuffer(*cb, &bi);
    if (r != VK_SUCCESS) {
        g->vk.vkFreeCommandBuffers(g->device, g->pool, 1, cb);
        return ez_vk_fail(r, "vkBeginCommandBuffer");
    }
    return ELIZA_OK;
}

/* One pause of a polling loop. */
static void spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

int32_t ez_vk_submit_wait(ez_gpu *g, VkCommandBuffer cb) {
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO};
    VkResult r = g->vk.vkResetFences(g->device, 1, &g->fence);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cb;
    if (r == VK_SUCCESS) r = g->vk.vkQueueSubmit(g->queue, 1, &si, g->fence);
    if (r == VK_SUCCESS && g->spin_wait) {
        while ((r = g->vk.vkGetFenceStatus(g->device, g->fence)) == VK_NOT_READY) spin_pause();
    } else if (r == VK_SUCCESS) {
        r = g->vk.vkWaitForFences(g->device, 1, &g->fence, VK_TRUE, UINT64_MAX);
    }
    if (r != VK_SUCCESS) return ez_vk_fail(r, "vkQueueSubmit / waiting for its fence");
    return ez_vk_check_validation(g);
}

int32_t ez_vk_oneshot_submit(ez_gpu *g, VkCommandBuffer cb) {
    VkResult r = g->vk.vkEndCommandBuffer(cb);
    int32_t rc = r == VK_SUCCESS ? ez_vk_submit_wait(g, cb) : ez_vk_fail(r, "vkEndCommandBuffer");
    g->vk.vkFreeCommandBuffers(g->device, g->pool, 1, &cb);
    return rc;
}

/* ---- capabilities ------------------------------------------------------------------- */

static void append_device(ez_strbuf *sb, uint32_t index, const ez_gpu_device_info *d, int usable) {
    ez_sb_printf(sb, "{\"index\": %u, \"name\": ", index);
    ez_sb_json_str(sb, d->name, strlen(d->name));
    ez_sb_printf(sb, ", \"type\": \"%s\", \"vendor_id\": %u, \"device_id\": %u, \"api\": \"%u.%u.%u\", \"driver\": ",
                 d->type, d->vendor_id, d->device_id, VK_API_VERSION_MAJOR(d->api_version),
                 VK_API_VERSION_MINOR(d->api_version), VK_API_VERSION_PATCH(d->api_version));
    ez_sb_json_str(sb, d->driver, strlen(d->driver));
    ez_sb_printf(sb,
                 ", \"fp16\": %s, \"int8\": %s, \"int8_dot\": %s, \"cooperative_matrix\": %s, \"timestamps\": %s"
                 ", \"subgroup_size\": %u, \"subgroup_arithmetic\": %s, \"device_memory_mb\": %llu, \"max_binding_mb\": %llu, \"usable\": %s}",
                 d->fp16 ? "true" : "false", d->int8 ? "true" : "false", d->int8_dot ? "true" : "false",
                 d->cooperative_matrix ? "true" : "false", d->timestamps ? "true" : "false", d->subgroup_size,
                 d->subgroup_arith ? "true" : "false",
                 (unsigned long long)(d->device_local_bytes >> 20), (unsigned long long)(d->max_binding_bytes >> 20),
                 usable ? "true" : "false");
}

void ez_gpu_append_capabilities(ez_strbuf *sb) {
    ez_vk_fns vk;
    VkInstance inst = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
    VkPhysicalDevice devs[16];
    uint32_t n = 16, i;
    const char *want = getenv("ELIZA_GPU_DEVICE");
    char reason[256] = "";
    int n_usable = 0;
    memset(&vk, 0, sizeof vk);
    ez_sb_puts(sb, "\"gpu\": {\"backend\": \"vulkan\", \"devices\": [");
    if (want && strcmp(want, "none") == 0) {
        snprintf(reason, sizeof reason, "GPU disabled (ELIZA_GPU_DEVICE=none)");
    } else if (load_loader(&vk) != ELIZA_OK || create_instance(&vk, 0, NULL, &inst, &messenger) != ELIZA_OK) {
        snprintf(reason, sizeof reason, "%s", ez_error_message());
        ez_clear_error();
    } else if (vk.vkEnumeratePhysicalDevices(inst, &n, devs) < 0 || n == 0) {
        snprintf(reason, sizeof reason, "no Vulkan device");
    } else {
        for (i = 0; i < n; i++) {
            ez_gpu_device_info info;
            char entry[128];
            int usable = describe(&vk, devs[i], &info) != UINT32_MAX &&
                         !denied_by(getenv("ELIZA_GPU_DENY"), &info, entry, sizeof entry);
            if (i) ez_sb_puts(sb, ", ");
            append_device(sb, i, &info, usable);
            n_usable += usable && (strcmp(info.type, "cpu") != 0 || names_device(want, i, &info));
        }
        if (!n_usable)
            snprintf(reason, sizeof reason, "no usable Vulkan GPU (CPU devices only when named, e.g. "
                     "ELIZA_GPU_DEVICE=llvmpipe)");
    }
    if (inst) vk.vkDestroyInstance(inst, NULL);
    if (vk.lib) ez_dlclose(vk.lib);
    ez_sb_puts(sb, "], \"reason\": ");
    if (*reason) {
        ez_sb_json_str(sb, reason, strlen(reason));
    } else {
        ez_sb_puts(sb, "null");
    }
    ez_sb_puts(sb, "}");
}
