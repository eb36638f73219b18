"""Whisper architecture in plain torch (training-oriented, no kv cache).

Parameter and buffer names follow OpenAI Whisper's state_dict exactly, so a
state_dict saved here loads into openai-whisper and is exported to whisper.cpp
ggml files under the same names.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ModelDims:
    n_mels: int = 80
    n_audio_ctx: int = 1500
    n_audio_state: int = 256
    n_audio_head: int = 4
    n_audio_layer: int = 4
    n_vocab: int = 51864
    n_text_ctx: int = 448
    n_text_state: int = 256
    n_text_head: int = 4
    n_text_layer: int = 4

    def to_dict(self):
        return asdict(self)


class LayerNorm(nn.LayerNorm):
    """LayerNorm computed in float32 (eps 1e-5), output in the input dtype."""

    def forward(self, x):
        return super().forward(x.float()).type(x.dtype)


class Linear(nn.Linear):
    def forward(self, x):
        b = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), b)


class Conv1d(nn.Conv1d):
    def _conv_forward(self, x, weight, bias):
        b = None if bias is None else bias.to(x.dtype)
        return super()._conv_forward(x, weight.to(x.dtype), b)


def sinusoids(length, channels, max_timescale=10000):
    """Fixed sinusoidal positions: [sin | cos] halves, as Whisper's encoder."""
    assert channels % 2 == 0
    log_inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-log_inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.n_head = n_head
        self.query = Linear(n_state, n_state)
        self.key = Linear(n_state, n_state, bias=False)
        self.value = Linear(n_state, n_state)
        self.out = Linear(n_state, n_state)

    def forward(self, x, xa=None, mask=None):
        q = self.query(x)
        src = x if xa is None else xa
        k = self.key(src)
        v = self.value(src)
        return self.out(self.qkv_attention(q, k, v, mask))

    def qkv_attention(self, q, k, v, mask=None):
        n_batch, n_ctx, n_state = q.shape
        h = self.n_head
        scale = (n_state // h) ** -0.25
        q = q.view(n_batch, n_ctx, h, -1).permute(0, 2, 1, 3) * scale
        k = k.view(n_batch, k.shape[1], h, -1).permute(0, 2, 3, 1) * scale
        v = v.view(n_batch, v.shape[1], h, -1).permute(0, 2, 1, 3)
        qk = q @ k
        if mask is not None:
            qk = qk + mask[:n_ctx, :n_ctx]
        w = F.softmax(qk.float(), dim=-1).to(q.dtype)
        return (w @ v).permute(0, 2, 1, 3).flatten(start_dim=2)


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state, n_head, cross_attention=False):
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head)
        self.attn_ln = LayerNorm(n_state)
        self.cross_attn = MultiHeadAttention(n_state, n_head) if cross_attention else None
        self.cross_attn_ln = LayerNorm(n_state) if cross_attention else None
        n_mlp = n_state * 4
        self.mlp = nn.Sequential(Linear(n_state, n_mlp), nn.GELU(), Linear(n_mlp, n_state))
        self.mlp_ln = LayerNorm(n_state)

    def forward(self, x, xa=None, mask=None):
        x = x + self.attn(self.attn_ln(x), mask=mask)
        if self.cross_attn is not None:
            x = x + self.cross_attn(self.cross_attn_ln(x), xa)
        x = x + self.mlp(self.mlp_ln(x))
        return x


class AudioEncoder(nn.Module):
    def __init__(self, n_mels, n_ctx, n_state, n_head, n_layer):
        super().__init__()
        self.conv1 = Conv1d(n_mels, n_state, kernel_size=3, padding=1)
        self.conv2 = Conv1d(n_state, n_state, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", sinusoids(n_ctx, n_state))
        self.blocks = nn.ModuleList(
            [ResidualAttentionBlock(n_state, n_head) for _ in range(n_layer)])
        self.ln_post = LayerNorm(n_state)

    def forward(self, x):
        """x: (batch, n_mels, 2*n_ctx) log-mel -> (batch, n_ctx, n_state)."""
        x = F.gelu(self.conv1(x))
        x = F.gelu(self.conv2(x))
        x = x.permute(0, 2, 1)
        # Whisper always runs 2*n_ctx mel frames; fewer (a shortened audio context, as the
        # engine's live policy uses) take the first positions.
        assert x.shape[1] <= self.positional_embedding.shape[0] and \
            x.shape[2] == self.positional_embedding.shape[1], "incorrect audio shape"
        x = (x + self.positional_embedding[:x.shape[1]]).to(x.dtype)
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


class TextDecoder(nn.Module):
    def __init__(self, n_vocab, n_ctx, n_state, n_head, n_layer):
        super().__init__()
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.empty(n_ctx, n_state))
        self.blocks = nn.ModuleList(
            [ResidualAttentionBlock(n_state, n_head, cross_attention=True) for _ in range(n_layer)])
        self.ln = LayerNorm(n_state)
        mask = torch.empty(n_ctx, n_ctx).fill_(-float("inf")).triu_(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, tokens, xa):
        """tokens: (batch, n_tok) int64; xa: encoder output -> logits (batch, n_tok, n_vocab)."""
        n = tokens.shape[-1]
        x = self.token_embedding(tokens) + self.positional_embedding[:n]
        x = x.to(xa.dtype)
        for block in self.blocks:
            x = block(x, xa, mask=self.mask)
        x = self.ln(x)
        return (x @ self.token_embedding.weight.to(x.dtype).t()).float()


class Whisper(nn.Module):
    def __init__(self, dims: ModelDims):
        super().__init__()
        self.dims = dims
        self.encoder = AudioEncoder(dims.n_mels, dims.n_audio_ctx, dims.n_audio_state,
                                    dims.n_audio_head, dims.n_audio_layer)
        self.decoder = TextDecoder(dims.n_vocab, dims.n_text_ctx, dims.n_text_state,
                                   dims.n_text_head, dims.n_text_layer)

    def embed_audio(self, mel):
        return self.encoder(mel)

    def logits(self, tokens, audio_features):
        return self.decoder(tokens, audio_features)

    def forward(self, mel, tokens):
        return self.decoder(tokens, self.encoder(mel))

    def init_weights(self, std=0.02, seed=None):
        """Initialisation for training from scratch (OpenAI ships no init).

        Linear weights, token and learned positional embeddings ~ N(0, std);
        residual output projections (attn.out, mlp.2) scaled by 1/sqrt(2*layers);
        biases 0; LayerNorms weight 1, bias 0; convs keep torch's default init.
        """
        g = torch.Generator().manual_seed(seed) if seed is not None else None
        n_layers = self.dims.n_audio_layer + self.dims.n_text_layer
        with torch.no_grad():
            for mname, mod in self.named_modules():
                if isinstance(mod, nn.LayerNorm):
                    mod.weight.fill_(1.0)
                    mod.bias.zero_()
                elif isinstance(mod, nn.Linear):
                    s = std
                    if mname.endswith("attn.out") or mname.endswith("mlp.2"):
                        s = std / math.sqrt(2 * n_layers)
                    mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * s)
                    if mod.bias is not None:
                        mod.bias.zero_()
                elif isinstance(mod, nn.Embedding):
                    mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * std)
            pe = self.decoder.positional_embedding
            pe.copy_(torch.randn(pe.shape, generator=g) * std)


def state_dict_for_export(model):
    """Ordered name -> float32 numpy array, including encoder.positional_embedding."""
    sd = model.state_dict()
    return {k: v.detach().float().cpu().numpy() for k, v in sd.items()}
