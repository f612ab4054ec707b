// A short Swift usage sample of libeliza through `import Eliza` (the module
// map of Eliza.xcframework). Copy it into an app target that links
// Eliza.xcframework; ios/build-xcframework.sh compiles it (and runs it on
// macOS) to keep it honest.
import Eliza

/// A libeliza failure: the C status code and the library's message.
struct ElizaError: Error, CustomStringConvertible {
    let status: Int32
    let message: String
    var description: String { "\(message) (\(String(cString: eliza_status_name(status))))" }
}

/// Turns a status into a thrown ElizaError (message read on the same thread).
func check(_ status: Int32) throws {
    if status < 0 {
        throw ElizaError(status: status, message: String(cString: eliza_last_error()))
    }
}

enum LibEliza {
    static var version: String { String(cString: eliza_version()) }
    static var capabilitiesJSON: String { String(cString: eliza_capabilities_json()) }

    /// A GGUF file's metadata and tensors as JSON. Library memory is freed
    /// with eliza_free(), never free().
    static func ggufInfo(path: String) throws -> String {
        var gguf: OpaquePointer?
        try check(eliza_gguf_open(path, &gguf))
        defer { eliza_gguf_close(gguf) }
        var json: UnsafeMutablePointer<CChar>?
        try check(eliza_gguf_info_json(gguf, nil, &json))
        defer { eliza_free(json) }
        return String(cString: json!)
    }
}

/// A language model; generation streams pieces of text as they are ready.
/// One thread uses it at a time; cancel() may come from any thread.
final class ElizaLLM {
    private var handle: OpaquePointer?
    private var stream: OpaquePointer?

    init(path: String, threads: Int32 = 0, contextSize: UInt32 = 0) throws {
        var params = eliza_llm_params()
        eliza_llm_default_params(&params)
        params.n_threads = threads
        params.context_size = contextSize
        try check(eliza_llm_open(path, &params, &handle))
    }

    deinit { eliza_llm_close(handle) }

    /// Generates from `prompt`, calling `onPiece` for each piece of text.
    func generate(_ prompt: String, maxTokens: Int32 = 128, temperature: Float = 0.8,
                  onPiece: (String) -> Void) throws {
        var config = eliza_llm_stream_config()
        eliza_llm_stream_default_config(&config)
        config.max_tokens = maxTokens
        config.temperature = temperature
        // The prompt is tokenized by stream_open, so its pointer need not outlive the call.
        try prompt.withCString { text in
            config.prompt = text
            try check(eliza_llm_stream_open(handle, &config, &stream))
        }
        defer { eliza_llm_stream_close(stream); stream = nil }
        var piece = eliza_llm_piece()
        piece.struct_size = UInt32(MemoryLayout<eliza_llm_piece>.size)
        while true {
            let status = eliza_llm_stream_next(stream, &piece)
            if status == ELIZA_DONE.rawValue { break }
            try check(status)
            if piece.text_len > 0, let text = piece.text { onPiece(String(cString: text)) }
        }
    }

    /// Stops a running generate() soon; it then throws ELIZA_E_CANCELLED.
    func cancel() {
        if let s = stream { eliza_llm_stream_cancel(s) }
    }
}
