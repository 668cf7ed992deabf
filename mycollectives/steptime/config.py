"""Model configurations for the step-time calculator (chapter 5), and their sizes.

A :class:`ModelConfig` is a Llama-like decoder: grouped-query attention
(``kv_heads`` key/value heads shared by ``heads`` query heads), a SwiGLU MLP
of width ``ffn`` (three matrices), RMSNorm, untied input and output
embeddings, and optionally ``experts`` MLPs per layer of which each token
uses ``top_k``. The presets are Llama 3's 8B, 70B and 405B, with the
shapes of Dubey et al. (2024) (``dubey2024llama3``), the same as the
models' published ``config.json``.

>>> round(LLAMA3_70B.params / 1e9, 2)  # Austin et al. count 70.4e9, rounding attention to 12e9
70.55
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ModelConfig:
    """Shapes, precision, and one batch's sequence length.

    Bytes: ``act_bytes`` per activation element and per element communicated
    in the forward and backward passes (bf16: 2), ``param_bytes`` and
    ``grad_bytes`` per parameter and gradient (bf16), ``optim_bytes`` of
    optimizer state per parameter (fp32 master weights and Adam's two
    moments: 12), so 16 bytes of model state per parameter in all
    (Rajbhandari et al. 2020).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq: int
    experts: int = 1
    top_k: int = 1
    act_bytes: int = 2
    param_bytes: int = 2
    grad_bytes: int = 2
    optim_bytes: int = 12

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq", "experts", "top_k"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"ModelConfig {self.name!r}: {f} must be a positive int, got {v!r}")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(
                f"ModelConfig {self.name!r}: heads ({self.heads}) must divide hidden ({self.hidden}) "
                f"and be a multiple of kv_heads ({self.kv_heads})"
            )
        if self.top_k > self.experts:
            raise ValueError(f"ModelConfig {self.name!r}: top_k {self.top_k} > experts {self.experts}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """The width of K (and of V), ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def moe(self) -> bool:
        return self.experts > 1

    @property
    def attention_params(self) -> int:
        """The attention parameters of a layer, ``W_q`` and ``W_o`` (``h x h``), ``W_k`` and ``W_v`` (``h x kv_dim``)."""
        return 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim

    @property
    def mlp_params(self) -> int:
        """The parameters of one SwiGLU MLP (gate, up and down projections)."""
        return 3 * self.hidden * self.ffn

    @property
    def layer_params(self) -> int:
        router = self.hidden * self.experts if self.moe else 0
        return self.attention_params + self.experts * self.mlp_params + router + 2 * self.hidden

    @property
    def embedding_params(self) -> int:
        """Input embedding and output projection (untied), and the final norm."""
        return 2 * self.vocab * self.hidden + self.hidden

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_params

    @property
    def active_params(self) -> int:
        """Parameters one token multiplies by (its ``top_k`` experts only)."""
        return self.params - self.layers * (self.experts - self.top_k) * self.mlp_params

    def flops_per_token(self) -> float:
        """Training FLOPs per token, ``6`` per active parameter that multiplies (forward 2,
        backward 4; the input embedding is a lookup), plus causal attention's scores and
        weighted sum, ``6 L s h`` (half of the ``12 L s h`` of full attention)."""
        matmul = self.active_params - self.vocab * self.hidden
        return 6 * matmul + 6 * self.layers * self.seq * self.hidden

    def with_seq(self, seq: int) -> ModelConfig:
        return replace(self, seq=seq)


LLAMA3_8B = ModelConfig("Llama 3 8B", 32, 4096, 32, 8, 14336, 128256, 8192)
LLAMA3_70B = ModelConfig("Llama 3 70B", 80, 8192, 64, 8, 28672, 128256, 8192)
LLAMA3_405B = ModelConfig("Llama 3 405B", 126, 16384, 128, 8, 53248, 128256, 8192)
# Mixtral 8x7B (Jiang et al. 2024): 32 layers, hidden 4096, 32 heads (8 KV), expert width 14336,
# 8 experts of which 2 per token, vocabulary 32000; sequences of 4096 tokens here.
MIXTRAL_8X7B = ModelConfig("Mixtral 8x7B", 32, 4096, 32, 8, 14336, 32000, 4096, experts=8, top_k=2)
PRESETS = {m.name: m for m in (LLAMA3_8B, LLAMA3_70B, LLAMA3_405B, MIXTRAL_8X7B)}
