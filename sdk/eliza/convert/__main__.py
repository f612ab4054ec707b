"""``python -m eliza.convert hf DIR OUT.gguf [--outtype f32|f16|bf16|q8_0]``"""

from . import main

raise SystemExit(main())
