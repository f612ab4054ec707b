package ai.eliza

import java.io.Closeable

/**
 * Kotlin API of libeliza on Android, over the JNI contract of [ElizaNative].
 *
 * ```
 * Llm.open(modelPath, LlmParams(nThreads = 4)).use { llm ->
 *     llm.stream("Hello", GenerationConfig(maxTokens = 64, temperature = 0f)).use { s ->
 *         while (true) { val piece = s.next() ?: break; print(piece) }
 *     }
 * }
 * ```
 *
 * Threads: a handle (Llm, LlmStream) is used by one thread at a time;
 * [LlmStream.cancel] is the exception and may be called from any thread.
 * Every failure is an [ElizaException] carrying the C status code. Handles
 * are java.io.Closeable, so `use {}` frees them on every Kotlin version.
 */
object Eliza {
    init {
        val library = ElizaNative.abiVersion()
        val bridge = ElizaNative.headerAbiVersion()
        if (library != bridge) {
            throw ElizaException(ElizaException.E_ABI, "libeliza has ABI $library, the JNI bridge was built for $bridge")
        }
    }

    /** eliza_abi_version() of the loaded library. */
    val abiVersion: Int get() = ElizaNative.abiVersion()

    /** The library's release string, e.g. "0.1.0". */
    val version: String get() = ElizaNative.version()

    /** What this build can do on this CPU (JSON: abi, version, simd, cpu, quant_types, engines, ...). */
    fun capabilitiesJson(): String = ElizaNative.capabilitiesJson()

    /** A GGUF file's metadata and tensors as the library's JSON document. */
    @JvmOverloads
    fun ggufInfoJson(path: String, maxArrayItems: Int = -1, includeTensors: Boolean = true): String =
        ElizaNative.ggufInfoJson(path, maxArrayItems, includeTensors)
}

/** eliza_llm_params; 0 keeps the library's default. */
data class LlmParams(val nThreads: Int = 0, val contextSize: Int = 0, val nBatch: Int = 0)

/** eliza_llm_stream_config; null keeps the library's default. */
data class GenerationConfig(
    val maxTokens: Int? = null,
    val temperature: Float? = null,
    val topK: Int? = null,
    val topP: Float? = null,
    val minP: Float? = null,
    val repeatPenalty: Float? = null,
    val repeatLastN: Int? = null,
    val seed: Long? = null,
    val contextSize: Int? = null,
    /** ELIZA_TOKENIZE_* bits applied to the prompt (default: ADD_BOS | PARSE_SPECIAL). */
    val flags: Int? = null,
    /** Stop strings; generation ends before any of them is emitted. */
    val stop: List<String> = emptyList()
)

/** eliza_llm_stats of a stream. */
data class LlmStats(
    val promptTokens: Int,
    val generatedTokens: Int,
    /** eliza_llm_stop_reason: 0 running, 1 EOS, 2 max tokens, 3 stop string, 4 context full, 5 cancelled. */
    val stopReason: Int,
    val prefillMs: Double,
    val decodeMs: Double,
    val prefillTokensPerSecond: Double,
    val decodeTokensPerSecond: Double
)

/** An open language model (one GGUF file) with its KV cache. */
class Llm private constructor(private var handle: Long) : Closeable {
    companion object {
        /** Opens the GGUF model at [path]; close it (or `use {}`) to free it. */
        @JvmStatic
        @JvmOverloads
        fun open(path: String, params: LlmParams = LlmParams()): Llm =
            Llm(ElizaNative.llmOpen(path, params.nThreads, params.contextSize, params.nBatch))
    }

    private fun live(): Long {
        check(handle != 0L) { "the model is closed" }
        return handle
    }

    /** The loaded model's description (JSON: architecture, n_vocab, context_size, ...). */
    fun infoJson(): String = ElizaNative.llmInfoJson(live())

    /** Starts generating from [prompt]; one stream per model at a time. */
    @JvmOverloads
    fun stream(prompt: String, config: GenerationConfig = GenerationConfig()): LlmStream {
        var mask = 0
        fun bit(value: Any?, b: Int) { if (value != null) mask = mask or b }
        bit(config.maxTokens, ElizaNative.SET_MAX_TOKENS)
        bit(config.temperature, ElizaNative.SET_TEMPERATURE)
        bit(config.topK, ElizaNative.SET_TOP_K)
        bit(config.topP, ElizaNative.SET_TOP_P)
        bit(config.minP, ElizaNative.SET_MIN_P)
        bit(config.repeatPenalty, ElizaNative.SET_REPEAT_PENALTY)
        bit(config.repeatLastN, ElizaNative.SET_REPEAT_LAST_N)
        bit(config.seed, ElizaNative.SET_SEED)
        bit(config.contextSize, ElizaNative.SET_CONTEXT_SIZE)
        bit(config.flags, ElizaNative.SET_FLAGS)
        val stream = ElizaNative.llmStreamOpen(
            live(), prompt, mask, config.flags ?: 0, config.maxTokens ?: 0,
            config.temperature ?: 0f, config.topK ?: 0, config.topP ?: 0f, config.minP ?: 0f,
            config.repeatPenalty ?: 0f, config.repeatLastN ?: 0, config.seed ?: 0L,
            config.contextSize ?: 0, config.stop.toTypedArray()
        )
        return LlmStream(stream)
    }

    /** Generates to the end, calling [onPiece] with each piece as it comes; returns the whole text. */
    @JvmOverloads
    fun generate(prompt: String, config: GenerationConfig = GenerationConfig(), onPiece: (String) -> Unit = {}): String {
        val text = StringBuilder()
        stream(prompt, config).use { s ->
            while (true) {
                val piece = s.next() ?: break
                if (piece.isNotEmpty()) {
                    text.append(piece)
                    onPiece(piece)
                }
            }
        }
        return text.toString()
    }

    /** Frees the model. Close its stream first. Idempotent. */
    override fun close() {
        val h = handle
        handle = 0L
        if (h != 0L) ElizaNative.llmClose(h)
    }
}

/** A running generation: pull pieces with [next] until it returns null. */
class LlmStream internal constructor(private var handle: Long) : Closeable {
    private val lock = Any()

    /** The next piece of text ("" while text is held back), or null when generation has ended. */
    fun next(): String? {
        check(handle != 0L) { "the stream is closed" }
        return ElizaNative.llmStreamNext(handle)
    }

    /** Asks a running [next] to stop soon (it then throws ElizaException E_CANCELLED). Any thread. */
    fun cancel() {
        synchronized(lock) {
            if (handle != 0L) ElizaNative.llmStreamCancel(handle)
        }
    }

    fun stats(): LlmStats {
        check(handle != 0L) { "the stream is closed" }
        val v = ElizaNative.llmStreamStats(handle)
        return LlmStats(v[0].toInt(), v[1].toInt(), v[2].toInt(), v[3], v[4], v[5], v[6])
    }

    /** Frees the stream; a concurrent [cancel] either runs before or sees it closed. Idempotent. */
    override fun close() {
        synchronized(lock) {
            val h = handle
            handle = 0L
            if (h != 0L) ElizaNative.llmStreamClose(h)
        }
    }
}
