// Command-line driver of ElizaSample.swift for macOS:
//   eliza-swift-sample [MODEL.gguf]
// prints the library version and capabilities, and the GGUF's info.
import Eliza
import Foundation

print("libeliza \(LibEliza.version), ABI \(eliza_abi_version()) (header \(ELIZA_ABI_VERSION))")
print(LibEliza.capabilitiesJSON)
let args = CommandLine.arguments
if args.count > 1 {
    do {
        print(try LibEliza.ggufInfo(path: args[1]))
    } catch {
        print("error: \(error)")
        exit(1)
    }
}
