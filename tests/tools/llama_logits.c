/* llama.cpp's logits for a token sequence, for comparisons with libeliza
 * and transformers (tests only; built by tests/tools/llama_logits.py
 * against the llama.cpp that tests/tools/llama_cpp.py builds).
 *
 *   llama_logits MODEL.gguf OUT.f32 TOKEN...   every position's logits,
 *                                              [n_tokens, n_vocab] float32
 *   llama_logits MODEL.gguf                    loads the model, exits 0 if
 *                                              llama.cpp accepts the file
 *
 * One batch, KV cache in F32, flash attention off, 1 thread per core up to 2. */
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [OUT.f32 TOKEN...]\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama.cpp cannot load %s\n", argv[1]);
        return 1;
    }
    int rc = 0;
    if (argc >= 4) {
        int n = argc - 3;
        struct llama_context_params cp = llama_context_default_params();
        cp.n_ctx = (uint32_t)(n < 256 ? 256 : n);
        cp.n_batch = cp.n_ubatch = (uint32_t)n;
        cp.n_threads = cp.n_threads_batch = 2;
        cp.type_k = cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
        struct llama_context *ctx = llama_init_from_model(model, cp);
        struct llama_batch batch = llama_batch_init(n, 0, 1);
        for (int i = 0; i < n; i++) {
            batch.token[i] = atoi(argv[3 + i]);
            batch.pos[i] = i;
            batch.n_seq_id[i] = 1;
            batch.seq_id[i][0] = 0;
            batch.logits[i] = 1;
        }
        batch.n_tokens = n;
        int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
        FILE *out = ctx ? fopen(argv[2], "wb") : NULL;
        if (!ctx || !out || llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "llama.cpp cannot evaluate %d tokens\n", n);
            rc = 1;
        } else {
            for (int i = 0; i < n && rc == 0; i++)
                if (fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab) rc = 1;
        }
        if (out) fclose(out);
        llama_batch_free(batch);
        if (ctx) llama_free(ctx);
    }
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
