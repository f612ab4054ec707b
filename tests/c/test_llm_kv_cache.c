/* The KV cache object (llm/kv.h): per-layer types, aliasing layers,
 * sliding rings that wrap, rewind and its limit, recurrent-state slots, and
 * both kinds of snapshot. Rows are written as an eval writes them: position
 * p's keys hold the value p + 0.25 * layer, so a read-back says which
 * position (and layer) a row holds. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "core/error.h"
#include "llm/kv.h"

#define N_CTX 64
#define N_BATCH 4
#define N_SWA 5
#define HEAD 32

/* Writes positions n_pos .. n_pos + n - 1 into every layer with rows of
 * its own, then holds them. */
static void put_positions(ez_kv_cache *c, int32_t n) {
    float row[2 * HEAD];
    ez_kv_cache_begin(c, n);
    for (int32_t p = c->n_pos; p < c->n_pos + n; p++)
        for (int il = 0; il < c->n_layer; il++) {
            const ez_kv_layer *L = &c->layers[il];
            if (L->src != il || !L->k) continue;
            for (int i = 0; i < 2 * HEAD; i++) row[i] = (float)p + 0.25f * (float)il;
            L->fk.kern->store(row, ez_kv_cache_k(c, il, p), (int64_t)(L->fk.row_bytes / L->fk.head_bytes) * HEAD);
            L->fv.kern->store(row, ez_kv_cache_v(c, il, p), (int64_t)(L->fv.row_bytes / L->fv.head_bytes) * HEAD);
        }
    ez_kv_cache_commit(c, n);
}

/* The position layer il's key row for p holds (its first value, back from
 * the layer's type: Q8_0's F16 scale rounds it by up to 0.02 here). */
static float key_at(const ez_kv_cache *c, int il, int32_t p) {
    const ez_kv_layer *L = &c->layers[il];
    float row[2 * HEAD];
    L->fk.kern->load(ez_kv_cache_k(c, il, p), row, (int64_t)(L->fk.row_bytes / L->fk.head_bytes) * HEAD);
    return roundf(row[0] - 0.25f * (float)L->src);
}

static ez_kv_layer_spec attn_spec(int type_k, int type_v, int32_t n_swa) {
    ez_kv_layer_spec s;
    memset(&s, 0, sizeof s);
    s.type_k = type_k;
    s.type_v = type_v;
    s.n_head_kv = 2;
    s.head_dim_k = HEAD;
    s.head_dim_v = HEAD;
    s.n_swa = n_swa;
    s.alias = -1;
    return s;
}

/* layers: 0 global F32/F16, 1 ring Q8_0/TBQ4_0, 2 aliases 0, 3 recurrent only, 4 ring F16 */
static ez_kv_cache *make_mixed(size_t state_bytes) {
    ez_kv_layer_spec s[5];
    ez_kv_cache *c = NULL;
    s[0] = attn_spec(EZ_KV_F32, EZ_KV_F16, 0);
    s[1] = attn_spec(EZ_KV_Q8_0, EZ_KV_TBQ4_0, N_SWA);
    s[2] = attn_spec(EZ_KV_F32, EZ_KV_F32, 0);
    s[2].alias = 0;
    s[3] = attn_spec(EZ_KV_F32, EZ_KV_F32, 0);
    s[3].n_head_kv = 0;
    s[3].state_bytes = state_bytes;
    s[4] = attn_spec(EZ_KV_F16, EZ_KV_F16, N_SWA);
    CHECK_RC(ez_kv_cache_create(s, 5, N_CTX, N_BATCH, &c), ELIZA_OK);
    return c;
}

static void test_kv_cache_per_layer_types_and_alias(void) {
    ez_kv_cache *c = make_mixed(0);
    if (!c) return;
    CHECK(c->layers[0].fk.type == EZ_KV_F32 && c->layers[0].fv.type == EZ_KV_F16);
    CHECK(c->layers[1].fk.type == EZ_KV_Q8_0 && c->layers[1].fv.type == EZ_KV_TBQ4_0);
    CHECK(c->layers[0].fk.row_bytes == 2 * HEAD * 4 && c->layers[0].fv.row_bytes == 2 * HEAD * 2);
    CHECK(c->layers[1].fk.row_bytes == 2 * 34 && c->layers[1].fv.row_bytes == 2 * 18);
    /* global rows: n_ctx; rings: window + batch */
    CHECK(c->layers[0].cap == N_CTX && c->layers[1].cap == N_SWA + N_BATCH && c->layers[4].cap == N_SWA + N_BATCH);
    /* the alias reads layer 0's rows and owns none */
    CHECK(c->layers[2].src == 0 && c->layers[2].k == c->layers[0].k && c->layers[2].v == c->layers[0].v);
    CHECK(c->layers[3].k == NULL && c->layers[3].state == NULL);
    CHECK(c->bytes == (size_t)N_CTX * (256 + 128) + (size_t)(N_SWA + N_BATCH) * (68 + 36 + 128 + 128));
    CHECK(ez_kv_cache_bytes_per_token(c) == 256 + 128 + 68 + 36 + 128 + 128);
    put_positions(c, 7);
    CHECK(key_at(c, 2, 6) == 6.0f && key_at(c, 0, 3) == 3.0f);
    ez_kv_cache_free(c);
}

static void test_kv_cache_ring_wraps(void) {
    ez_kv_cache *c = make_mixed(0);
    int ok = 1;
    if (!c) return;
    for (int i = 0; i < 9; i++) put_positions(c, i % N_BATCH + 1); /* 1+2+3+4+1+2+3+4+1 = 21 positions */
    CHECK(c->n_pos == 21 && c->hi == 21);
    /* the ring keeps the last cap positions, the global layer all of them */
    for (int32_t p = 21 - (N_SWA + N_BATCH); p < 21; p++) ok &= key_at(c, 1, p) == (float)p && key_at(c, 4, p) == (float)p;
    for (int32_t p = 0; p < 21; p++) ok &= key_at(c, 0, p) == (float)p;
    CHECK(ok);
    CHECK(key_at(c, 1, 11) == 20.0f); /* slot 11 % 9 = 2 was overwritten by 20 */
    ez_kv_cache_free(c);
}

static void test_kv_cache_rewind_within_the_ring_limit(void) {
    ez_kv_cache *c = make_mixed(0);
    if (!c) return;
    put_positions(c, 20);
    /* the next query at 20 - r sees back to 20 - r - 4; the ring holds 11 .. 19 */
    CHECK(ez_kv_cache_can_rewind_to(c, 20 - (N_BATCH + 1)));
    CHECK(!ez_kv_cache_can_rewind_to(c, 20 - (N_BATCH + 2)));
    CHECK_RC(ez_kv_cache_rewind(c, N_BATCH + 2), ELIZA_E_INVALID_ARG);
    CHECK(c->n_pos == 20);
    CHECK_RC(ez_kv_cache_rewind(c, 21), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_kv_cache_rewind(c, -1), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_kv_cache_rewind(c, 3), ELIZA_OK);
    CHECK(c->n_pos == 17);
    /* dropped positions are overwritten: 17 .. 18 again; the window of 19
     * (15 .. 19) still reads what it should */
    put_positions(c, 2);
    CHECK(key_at(c, 1, 15) == 15.0f && key_at(c, 1, 18) == 18.0f);
    /* two rewinds in a row count from the highest position written (20):
     * 19 -> 17 -> 15 is 5 back, allowed; one more is not */
    CHECK_RC(ez_kv_cache_rewind(c, 2), ELIZA_OK);
    CHECK_RC(ez_kv_cache_rewind(c, 2), ELIZA_OK);
    CHECK_RC(ez_kv_cache_rewind(c, 1), ELIZA_E_INVALID_ARG);
    /* a cache without rings rewinds any distance */
    {
        ez_kv_layer_spec s = attn_spec(EZ_KV_F16, EZ_KV_F16, 0);
        ez_kv_cache *g = NULL;
        CHECK_RC(ez_kv_cache_create(&s, 1, N_CTX, N_BATCH, &g), ELIZA_OK);
        if (g) {
            put_positions(g, 40);
            CHECK_RC(ez_kv_cache_rewind(g, 39), ELIZA_OK);
            CHECK(g->n_pos == 1 && key_at(g, 0, 0) == 0.0f);
            ez_kv_cache_free(g);
        }
    }
    ez_kv_cache_clear(c);
    CHECK(c->n_pos == 0 && c->hi == 0);
    ez_kv_cache_free(c);
}

static void test_kv_cache_recurrent_state_and_snapshots(void) {
    ez_kv_cache *c = make_mixed(100);
    ez_kv_snapshot *snap = NULL;
    uint8_t *st;
    if (!c) return;
    st = c->layers[3].state;
    CHECK(st != NULL && c->layers[3].state_bytes == 100);
    put_positions(c, 10);
    memset(st, 7, 100);
    /* the state mixes every position: no rewind, only n = 0 */
    CHECK_RC(ez_kv_cache_rewind(c, 1), ELIZA_E_INVALID_ARG);
    CHECK_RC(ez_kv_cache_rewind(c, 0), ELIZA_OK);
    CHECK_RC(ez_kv_snapshot_take(c, EZ_KV_SNAP_STATES, &snap), ELIZA_OK);
    CHECK(ez_kv_snapshot_bytes(snap) == 100);
    /* the speculative step: k = 4 drafted tokens, the state moves on */
    put_positions(c, N_BATCH);
    memset(st, 9, 100);
    CHECK_RC(ez_kv_snapshot_restore(c, snap), ELIZA_OK);
    CHECK(c->n_pos == 10 && st[0] == 7 && st[99] == 7);
    CHECK(key_at(c, 1, 9) == 9.0f && key_at(c, 4, 5) == 5.0f);
    /* again from the same mark, then restored a second time */
    put_positions(c, 2);
    CHECK_RC(ez_kv_snapshot_restore(c, snap), ELIZA_OK);
    CHECK(c->n_pos == 10);
    /* a clear drops below the mark: the snapshot is stale */
    ez_kv_cache_clear(c);
    CHECK(st[0] == 0);
    put_positions(c, 12);
    CHECK_RC(ez_kv_snapshot_restore(c, snap), ELIZA_E_STATE);
    CHECK(c->n_pos == 12);
    /* past the ring's reach a STATES snapshot cannot bring the rows back */
    CHECK_RC(ez_kv_snapshot_take(c, EZ_KV_SNAP_STATES, &snap), ELIZA_OK);
    put_positions(c, N_BATCH + 2);
    CHECK_RC(ez_kv_snapshot_restore(c, snap), ELIZA_E_STATE);
    ez_kv_snapshot_free(snap);
    ez_kv_cache_free(c);
}

static void test_kv_cache_full_snapshot_restores_overwritten_rings(void) {
    ez_kv_cache *c = make_mixed(16), *other = make_mixed(16);
    ez_kv_snapshot *snap = NULL;
    int ok = 1;
    if (!c || !other) {
        ez_kv_cache_free(c);
        ez_kv_cache_free(other);
        return;
    }
    put_positions(c, 20);
    memset(c->layers[3].state, 3, 16);
    CHECK_RC(ez_kv_snapshot_take(c, EZ_KV_SNAP_FULL, &snap), ELIZA_OK);
    CHECK(ez_kv_snapshot_bytes(snap) == c->bytes);
    /* far past what a rewind could undo, and below the mark */
    put_positions(c, 30);
    ez_kv_cache_clear(c);
    put_positions(c, 5);
    CHECK_RC(ez_kv_snapshot_restore(c, snap), ELIZA_OK);
    CHECK(c->n_pos == 20 && c->layers[3].state[15] == 3);
    for (int32_t p = 20 - (N_SWA + N_BATCH); p < 20; p++) ok &= key_at(c, 1, p) == (float)p && key_at(c, 4, p) == (float)p;
    for (int32_t p = 0; p < 20; p++) ok &= key_at(c, 0, p) == (float)p;
    CHECK(ok);
    CHECK_RC(ez_kv_snapshot_restore(other, snap), ELIZA_E_INVALID_ARG);
    /* a snapshot outlives its cache */
    ez_kv_cache_free(c);
    ez_kv_snapshot_free(snap);
    ez_kv_cache_free(other);
}

static void test_kv_cache_rejects_bad_specs(void) {
    ez_kv_layer_spec s[2];
    ez_kv_cache *c = NULL;
    s[0] = attn_spec(EZ_KV_F32, EZ_KV_F32, 0);
    s[1] = attn_spec(EZ_KV_F32, EZ_KV_F32, 0);
    s[0].alias = 1; /* not an earlier layer */
    CHECK_RC(ez_kv_cache_create(s, 2, N_CTX, N_BATCH, &c), ELIZA_E_INVALID_ARG);
    s[0].alias = -1;
    s[1].alias = 0;
    s[1].n_swa = N_SWA; /* a window the aliased layer has not */
    CHECK_RC(ez_kv_cache_create(s, 2, N_CTX, N_BATCH, &c), ELIZA_E_INVALID_ARG);
    s[1] = attn_spec(EZ_KV_Q4_0, EZ_KV_F32, 0);
    s[1].head_dim_k = 48; /* not whole blocks */
    CHECK_RC(ez_kv_cache_create(s, 2, N_CTX, N_BATCH, &c), ELIZA_E_INVALID_ARG);
    s[1] = attn_spec(EZ_KV_COUNT, EZ_KV_F32, 0);
    CHECK_RC(ez_kv_cache_create(s, 2, N_CTX, N_BATCH, &c), ELIZA_E_INVALID_ARG);
    s[1] = attn_spec(EZ_KV_F32, EZ_KV_F32, 0);
    CHECK_RC(ez_kv_cache_create(s, 2, 0, N_BATCH, &c), ELIZA_E_INVALID_ARG);
    CHECK(c == NULL);
}

int main(void) {
    test_kv_cache_per_layer_types_and_alias();
    test_kv_cache_ring_wraps();
    test_kv_cache_rewind_within_the_ring_limit();
    test_kv_cache_recurrent_state_and_snapshots();
    test_kv_cache_full_snapshot_restores_overwritten_rings();
    test_kv_cache_rejects_bad_specs();
    printf("test_llm_kv_cache: %d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
