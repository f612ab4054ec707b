// Drives the Kotlin wrapper on a desktop JVM (wheels/proofs.py jni, when
// kotlinc exists): java -Djava.library.path=DIR -cp JARS KotlinSmokeKt smoke.gguf
import ai.eliza.Eliza
import ai.eliza.ElizaException
import ai.eliza.Llm

fun main(args: Array<String>) {
    val gguf = args[0]
    check(Eliza.abiVersion > 0)
    check(Eliza.version.isNotEmpty())
    val info = Eliza.ggufInfoJson(gguf)
    check("smokearch" in info) { info }
    try {
        Eliza.ggufInfoJson("/no-such-dir/\u00fc\uD83D\uDE00.gguf")
        error("missing file did not throw")
    } catch (e: ElizaException) {
        check(e.status == ElizaException.E_IO) { "status ${e.status}" }
        check("\u00fc\uD83D\uDE00.gguf" in (e.message ?: "")) { e.message ?: "" }
    }
    if (Eliza.capabilitiesJson().replace(" ", "").contains("\"llm\":true")) {
        try {
            Llm.open(gguf).use { error("opened a non-LLM file") }
        } catch (e: ElizaException) {
            check(e.status < 0)
        }
    }
    println("Kotlin smoke: ok (libeliza ${Eliza.version})")
}
