// The 6-bit scale and min of sub-block j < 8 of a Q4_K / Q5_K super-block
// whose 12 packed scale bytes start at byte `off` (ggml's get_scale_min_k4).
void scale_min_k4(uint off, uint j, out float sc, out float mn) {
    if (j < 4) {
        sc = float(byte_at(off + j) & 63u);
        mn = float(byte_at(off + j + 4) & 63u);
    } else {
        sc = float((byte_at(off + j + 4) & 15u) | ((byte_at(off + j - 4) >> 6) << 4));
        mn = float((byte_at(off + j + 4) >> 4) | ((byte_at(off + j) >> 6) << 4));
    }
}
