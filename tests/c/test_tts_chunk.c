/* tts/chunk.c on its own: text pieces for the G2P, phoneme chunks cut to
 * what one forward takes, the stream's early first cut, and a line's
 * sentences joined as KPipeline chunks them. */
#include <stdio.h>
#include <string.h>

#include "tts/chunk.h"
#include "check.h"

static void test_text_pieces_follow_lines_and_cut_long_ones_at_sentences(void) {
    static char text[4200];
    size_t pos = 0, b = 0, e = 0;
    const char *lines = "\n\nOne line.\r\nTwo\n";
    CHECK(ez_tts_next_text_piece(lines, strlen(lines), &pos, &b, &e) && b == 2 && e == 11);
    CHECK(ez_tts_next_text_piece(lines, strlen(lines), &pos, &b, &e) && b == 13 && e == 16);
    CHECK(!ez_tts_next_text_piece(lines, strlen(lines), &pos, &b, &e) && pos == strlen(lines));
    /* 4200 bytes without a break: cut after the last sentence end inside 2000 */
    memset(text, 'a', sizeof text - 1);
    memcpy(text + 1500, ". ", 2);
    memcpy(text + 1800, "x y", 3);
    pos = 0;
    CHECK(ez_tts_next_text_piece(text, sizeof text - 1, &pos, &b, &e) && b == 0 && e == 1501);
    CHECK(ez_tts_is_blank(" \t\r", 0, 3) && !ez_tts_is_blank(" a ", 0, 3));
}

static void test_phoneme_chunks_are_lines_cut_back_to_a_space(void) {
    const char *ph = "  ab cd ef\nxy";
    size_t pos = 0, b = 0, e = 0;
    int n_cp = 0;
    CHECK(ez_tts_next_phoneme_chunk(ph, strlen(ph), 6, &pos, &b, &e, &n_cp) && b == 2 && e == 7 && n_cp == 5);
    CHECK(ez_tts_next_phoneme_chunk(ph, strlen(ph), 6, &pos, &b, &e, &n_cp) && b == 8 && e == 10 && n_cp == 2);
    CHECK(ez_tts_next_phoneme_chunk(ph, strlen(ph), 6, &pos, &b, &e, &n_cp) && b == 11 && e == 13 && n_cp == 2);
    CHECK(!ez_tts_next_phoneme_chunk(ph, strlen(ph), 6, &pos, &b, &e, &n_cp));
    /* two-byte code points count once */
    ph = "\xc9\x99\xc9\x99 \xc9\x99";
    pos = 0;
    CHECK(ez_tts_next_phoneme_chunk(ph, strlen(ph), 510, &pos, &b, &e, &n_cp) && e == strlen(ph) && n_cp == 4);
}

static void test_first_cut_at_a_clause_with_room_on_both_sides(void) {
    /* 12 before the comma, 30 after: cut just past ", " */
    const char *ph = "aaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    int n = (int)strlen(ph), cut_cp = 0;
    size_t cut = ez_tts_first_clause_cut(ph, 0, (size_t)n, n, &cut_cp);
    CHECK_MSG(cut == 13 && cut_cp == 13, "cut at %zu (%d code points)", cut, cut_cp);
    /* a short line is not cut; nor one whose mark leaves too little after it */
    CHECK(ez_tts_first_clause_cut("aaaaaaaaaa, bbbb", 0, 16, 16, &cut_cp) == 0);
    ph = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, cc";
    n = (int)strlen(ph);
    CHECK(ez_tts_first_clause_cut(ph, 0, (size_t)n, n, &cut_cp) == 0);
}

static void join(const char *in, int max_cp, const char *want) {
    char buf[128];
    size_t n = strlen(in), len;
    memcpy(buf, in, n + 1);
    len = ez_tts_join_sentences(buf, n, max_cp);
    CHECK_MSG(len == strlen(want) && memcmp(buf, want, len) == 0 && buf[len] == '\0', "'%s' -> '%.*s'", in, (int)len,
              buf);
}

static void test_sentences_join_while_they_fit(void) {
    join("aa.\nbb.\ncc.", 510, "aa. bb. cc.");
    /* one space between them, whatever the lines' ends held; empty lines go */
    join("  aa. \n\n \t\nbb.\r\n", 510, "aa. bb.");
    /* a join that would pass max_cp starts a new line; code points, not bytes */
    join("aa.\nbb.\ncc.", 7, "aa. bb.\ncc.");
    join("\xc9\x99\xc9\x99.\nbb.", 7, "\xc9\x99\xc9\x99. bb.");
    join("\xc9\x99\xc9\x99.\nbb.", 6, "\xc9\x99\xc9\x99.\nbb.");
    join("aaaaaaaa.\nb.", 4, "aaaaaaaa.\nb.");
    join("", 510, "");
    join("\n \n", 510, "");
}

int main(void) {
    test_text_pieces_follow_lines_and_cut_long_ones_at_sentences();
    test_phoneme_chunks_are_lines_cut_back_to_a_space();
    test_first_cut_at_a_clause_with_room_on_both_sides();
    test_sentences_join_while_they_fit();
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed != 0;
}
