/* Public GGUF inspection: argument checks and handle lifetime over
 * core/gguf (which also builds the info document described in docs/gguf.md). */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/error.h"
#include "core/gguf.h"

struct eliza_gguf {
    ez_gguf *g;
};

void eliza_gguf_info_default_params(eliza_gguf_info_params *params) {
    if (!params) return;
    memset(params, 0, sizeof *params);
    params->struct_size = (uint32_t)sizeof *params;
    params->max_array_items = 8;
    params->include_tensors = 1;
}

int32_t eliza_gguf_open(const char *path, eliza_gguf **out) {
    eliza_gguf *h;
    int32_t rc;

    ez_clear_error();
    if (!out) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_gguf_open: out is NULL");
    *out = NULL;
    if (!path) return ez_fail(ELIZA_E_INVALID_ARG, "eliza_gguf_open: path is NULL");
    h = (eliza_gguf *)calloc(1, sizeof *h);
    if (!h) return ez_fail(ELIZA_E_NOMEM, "out of memory opening '%s'", path);
    rc = ez_gguf_open(path, &h->g);
    if (rc) {
        free(h);
        return rc;
    }
    *out = h;
    return ELIZA_OK;
}

void eliza_gguf_close(eliza_gguf *gguf) {
    if (!gguf) return;
    ez_gguf_close(gguf->g);
    free(gguf);
}

int32_t eliza_gguf_info_json(const eliza_gguf *gguf, const eliza_gguf_info_params *params,
                             char **out_json) {
    eliza_gguf_info_params p;

    ez_clear_error();
    if (out_json) *out_json = NULL;
    if (!gguf || !out_json)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_gguf_info_json: %s is NULL",
                       gguf ? "out_json" : "gguf");
    eliza_gguf_info_default_params(&p);
    if (params) {
        if (params->struct_size < sizeof(uint32_t))
            return ez_fail(ELIZA_E_ABI, "eliza_gguf_info_params.struct_size is %u; fill the"
                           " struct with eliza_gguf_info_default_params()", params->struct_size);
        /* Only the fields the caller's struct has; the rest keep defaults. */
        memcpy(&p, params, EZ_MIN((size_t)params->struct_size, sizeof p));
    }
    return ez_gguf_info_json(gguf->g, p.max_array_items, p.include_tensors != 0, out_json);
}

int32_t eliza_gguf_tensor_f32(const eliza_gguf *gguf, const char *name, float **out_data,
                              uint64_t *out_count) {
    const ez_gguf_tensor *t;
    int32_t rc;

    ez_clear_error();
    if (out_data) *out_data = NULL;
    if (out_count) *out_count = 0;
    if (!gguf || !name || !out_data || !out_count)
        return ez_fail(ELIZA_E_INVALID_ARG, "eliza_gguf_tensor_f32: %s is NULL",
                       !gguf ? "gguf" : !name ? "name" : !out_data ? "out_data" : "out_count");
    t = ez_gguf_find_tensor(gguf->g, name);
    if (!t) return ez_fail(ELIZA_E_NOT_FOUND, "no tensor named '%s'", name);
    rc = ez_gguf_tensor_f32(t, out_data);
    if (rc) return rc;
    *out_count = t->n_elements;
    return ELIZA_OK;
}
