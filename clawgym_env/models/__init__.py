"""Models ClawGym can serve without a model hub: tiny test models (dense and MoE) and the embedded SmolLM2.

Heavy imports (torch, transformers, gguf) happen inside the functions, so importing this
package is cheap.
"""

from clawgym_env.models.cache import models_cache_dir
from clawgym_env.models.chat_template import TOOLS_CHATML_TEMPLATE
from clawgym_env.models.smollm2 import default_model_path
from clawgym_env.models.testing import tiny_model_path, tiny_moe_model_path
from clawgym_env.models.tiny import build_tiny_model
from clawgym_env.models.tiny_moe import build_tiny_moe_model

__all__ = [
    "TOOLS_CHATML_TEMPLATE",
    "build_tiny_model",
    "build_tiny_moe_model",
    "default_model_path",
    "models_cache_dir",
    "tiny_model_path",
    "tiny_moe_model_path",
]
