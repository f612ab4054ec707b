"""``python -m eliza.convert hf DIR OUT.gguf [--outtype f32|f16|bf16|q8_0]``
``python -m eliza.convert kokoro [--onnx FILE | --pth FILE --config FILE --voices FILE] OUT.gguf``
``python -m eliza.convert pyannote ONNX OUT.gguf`` / ``resemblyzer PT OUT.gguf``"""

from . import main

raise SystemExit(main())
