package ai.eliza;

/**
 * The JNI contract with android/src/main/cpp/eliza_jni.c: one static native
 * per bridged call of include/eliza.h. Handles are C pointers as longs; the
 * Kotlin wrapper (Eliza, Llm, LlmStream) owns them and is what apps use.
 *
 * Loading libeliza_jni.so also loads libeliza.so (its DT_NEEDED); both sit in
 * the AAR's jni/ABI/ directory.
 */
public final class ElizaNative {
    static {
        System.loadLibrary("eliza");
        System.loadLibrary("eliza_jni");
    }

    private ElizaNative() {}

    // Bits of llmStreamOpen's setMask: which values the caller chose (the
    // others keep eliza_llm_stream_default_config()'s). Same as eliza_jni.c.
    public static final int SET_MAX_TOKENS = 1 << 0;
    public static final int SET_TEMPERATURE = 1 << 1;
    public static final int SET_TOP_K = 1 << 2;
    public static final int SET_TOP_P = 1 << 3;
    public static final int SET_MIN_P = 1 << 4;
    public static final int SET_REPEAT_PENALTY = 1 << 5;
    public static final int SET_REPEAT_LAST_N = 1 << 6;
    public static final int SET_SEED = 1 << 7;
    public static final int SET_CONTEXT_SIZE = 1 << 8;
    public static final int SET_FLAGS = 1 << 9;

    /** eliza_abi_version(): the ABI of the loaded libeliza. */
    public static native int abiVersion();

    /** ELIZA_ABI_VERSION of the header the bridge was compiled against. */
    public static native int headerAbiVersion();

    public static native String version();

    public static native String capabilitiesJson();

    /** eliza_gguf_open + eliza_gguf_info_json; maxArrayItems < 0 keeps the default. */
    public static native String ggufInfoJson(String path, int maxArrayItems, boolean includeTensors);

    /** eliza_llm_open; 0 for a value means the library's default. */
    public static native long llmOpen(String path, int nThreads, int contextSize, int nBatch);

    public static native void llmClose(long llm);

    public static native String llmInfoJson(long llm);

    public static native long llmStreamOpen(long llm, String prompt, int setMask, int flags, int maxTokens,
            float temperature, int topK, float topP, float minP, float repeatPenalty, int repeatLastN,
            long seed, int contextSize, String[] stop);

    /** The next piece ("" while text is held back), null when the stream has ended. */
    public static native String llmStreamNext(long stream);

    /** Safe from any thread while the stream is open. */
    public static native void llmStreamCancel(long stream);

    /** [promptTokens, generatedTokens, stopReason, prefillMs, decodeMs, prefillTok/s, decodeTok/s] */
    public static native double[] llmStreamStats(long stream);

    public static native void llmStreamClose(long stream);
}
