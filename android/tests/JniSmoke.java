import ai.eliza.ElizaException;
import ai.eliza.ElizaNative;

/**
 * Drives the JNI bridge on a desktop JVM (wheels/proofs.py jni):
 *   java -Djava.library.path=DIR -cp CLASSES JniSmoke smoke.gguf
 * DIR holds libeliza and libeliza_jni built for this host.
 */
public final class JniSmoke {
    private static void check(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    public static void main(String[] args) {
        String gguf = args[0];
        check(ElizaNative.abiVersion() == ElizaNative.headerAbiVersion(), "ABI version");
        check(!ElizaNative.version().isEmpty(), "version");
        String caps = ElizaNative.capabilitiesJson();
        check(caps.startsWith("{") && caps.contains("\"abi\""), "capabilities: " + caps);

        String info = ElizaNative.ggufInfoJson(gguf, -1, true);
        check(info.contains("\"smokearch\"") && info.contains("smoke.weight"), "gguf info: " + info);
        String noTensors = ElizaNative.ggufInfoJson(gguf, 2, false);
        check(!noTensors.contains("smoke.weight"), "include_tensors=false: " + noTensors);

        // A missing file is ELIZA_E_IO, and the message carries the path
        // through UTF-8 <-> UTF-16 intact (emoji = a surrogate pair in Java).
        String missing = "/no-such-dir/caf\u00e9-\uD83D\uDE00.gguf";
        try {
            ElizaNative.ggufInfoJson(missing, -1, true);
            throw new AssertionError("missing file did not throw");
        } catch (ElizaException e) {
            check(e.getStatus() == ElizaException.E_IO, "status " + e.getStatus());
            check(e.getMessage().contains("caf\u00e9-\uD83D\uDE00.gguf"), "message: " + e.getMessage());
        }

        // The LLM calls exist in the library once the engine is built in; a
        // file of another architecture must then be an error, not a crash.
        if (caps.replace(" ", "").contains("\"llm\":true")) {
            try {
                ElizaNative.llmOpen(gguf, 1, 0, 0);
                throw new AssertionError("llmOpen accepted a non-LLM file");
            } catch (ElizaException e) {
                check(e.getStatus() < 0, "llm status " + e.getStatus());
            }
        }
        System.out.println("JNI smoke: ok (libeliza " + ElizaNative.version() + ", ABI " + ElizaNative.abiVersion() + ")");
    }
}
