"""PyTorch twins of probformer's seq2seq Transformer and Set Transformer.

`trainer export --format pytorch` writes a state_dict of this module as
safetensors (PyTorch names and layouts) and this file next to it; the
module is also printed by `trainer export --format pytorch --print-module`.
It needs torch and numpy only (no `safetensors` package):

    import probformer_torch as pt
    model, src_vocab, tgt_vocab = pt.from_export("model.safetensors")
    print(pt.translate(model, src_vocab, tgt_vocab, ["the dog sees the cat"]))

or, from a shell, one translation per line of standard input:

    python3 probformer_torch.py model.safetensors < sentences.txt

The module is nn.Transformer (batch_first, ReLU feed-forward, LayerNorm eps
1e-5, norm_first = model.pre_ln, dropout 0: it is for inference) with
probformer's input and output layers:

    memory = Encoder(√d·E_src[src] + PE)
    logits = Decoder(√d·E_tgt[tgt_in] + PE, memory) W_outᵀ + b_out

PE is the sinusoidal encoding with sin on even and cos on odd features,
PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)),
kept as the buffer `pos` (exported, so the values are probformer's own).
The encoder and decoder stacks end with a LayerNorm with pre-LN or
model.final_norm; with model.tie_output, out.weight is tgt_emb.weight.
Decoding starts from <bos>, attends causally, and greedy search takes the
most probable next token (the lowest id among ties) until <eos> or max_len
tokens, <eos> included, as `trainer translate` does; a source is cut to
max_source_len words.

A maxnorm (Set Transformer) export loads into ProbformerSetTransformer:

    model, _, _ = pt.from_export("model.safetensors")
    out = model(x, mask)        # [B, seeds, dim_out]
    pred = model.predict(x, mask)  # [B, dim_out], out's mean over the seeds

which is probformer's prediction for sets x [B, N, dim_in] with mask
[B, N] (1 real, 0 padding).
"""

import json
import math
import struct
import sys

import numpy as np
import torch
from torch import nn

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def sinusoidal_encoding(n, d):
    """probformer's positional encoding of positions 0..n-1, [n, d] float64."""
    pos = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(d)
    angle = pos / np.power(10000.0, (j - j % 2).astype(np.float64) / d)
    return torch.from_numpy(np.where(j % 2 == 0, np.sin(angle), np.cos(angle)))


class ProbformerSeq2Seq(nn.Module):
    """probformer's layers.Seq2Seq as nn.Transformer plus embeddings,
    positions and output layer. Keyword arguments are the export's
    pytorch_config metadata."""

    def __init__(self, d_model, heads, ff, enc_layers, dec_layers, src_vocab, tgt_vocab,
                 max_len, max_source_len=None, pre_ln=False, final_norm=False, tie_output=False):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.max_source_len = max_source_len if max_source_len is not None else max_len - 1
        self.src_emb = nn.Embedding(src_vocab, d_model)
        self.tgt_emb = nn.Embedding(tgt_vocab, d_model)
        self.register_buffer("pos", sinusoidal_encoding(max_len, d_model).float())
        common = dict(dim_feedforward=ff, dropout=0.0, activation="relu", layer_norm_eps=1e-5,
                      batch_first=True, norm_first=pre_ln)
        final = pre_ln or final_norm
        encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d_model, heads, **common), enc_layers,
            norm=nn.LayerNorm(d_model, eps=1e-5) if final else None, enable_nested_tensor=False)
        decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d_model, heads, **common), dec_layers,
            norm=nn.LayerNorm(d_model, eps=1e-5) if final else None)
        self.transformer = nn.Transformer(d_model, heads, custom_encoder=encoder, custom_decoder=decoder,
                                          dropout=0.0, batch_first=True)
        self.out = nn.Linear(d_model, tgt_vocab)
        if tie_output:
            self.out.weight = self.tgt_emb.weight

    def embed(self, emb, ids):
        """√d·E[ids] + PE: ids [B, T] → [B, T, d]."""
        return emb(ids) * math.sqrt(self.d_model) + self.pos[: ids.size(1)]

    def encode(self, src, src_key_padding_mask=None):
        """src [B, S] ids, src_key_padding_mask [B, S] (True at padding) → memory [B, S, d]."""
        return self.transformer.encoder(self.embed(self.src_emb, src), src_key_padding_mask=src_key_padding_mask)

    def decode(self, memory, tgt_in, memory_key_padding_mask=None, tgt_key_padding_mask=None):
        """Logits [B, T, V] of the token after each position of tgt_in [B, T]
        (<bos> y1 …), causally."""
        t = tgt_in.size(1)
        causal = torch.triu(torch.full((t, t), float("-inf"), dtype=memory.dtype, device=memory.device), diagonal=1)
        h = self.transformer.decoder(self.embed(self.tgt_emb, tgt_in), memory, tgt_mask=causal,
                                     tgt_key_padding_mask=tgt_key_padding_mask,
                                     memory_key_padding_mask=memory_key_padding_mask)
        return self.out(h)

    def forward(self, src, tgt_in, src_key_padding_mask=None, tgt_key_padding_mask=None):
        memory = self.encode(src, src_key_padding_mask)
        return self.decode(memory, tgt_in, src_key_padding_mask, tgt_key_padding_mask)

    @torch.no_grad()
    def greedy(self, srcs, max_len=None):
        """Greedy decoding of source id lists (cut to max_source_len): the
        generated ids of each, without <bos> and <eos>. An empty source
        gives []."""
        max_len = max_len or self.max_len
        srcs = [list(s)[: self.max_source_len] for s in srcs]
        out = [[] for _ in srcs]
        rows = [i for i, s in enumerate(srcs) if s]
        if not rows:
            return out
        dev = self.pos.device
        lengths = torch.tensor([len(srcs[i]) for i in rows], device=dev)
        width = int(lengths.max())
        src = torch.full((len(rows), width), PAD_ID, dtype=torch.long, device=dev)
        for r, i in enumerate(rows):
            src[r, : len(srcs[i])] = torch.tensor(srcs[i], dtype=torch.long)
        pad = torch.arange(width, device=dev)[None, :] >= lengths[:, None]
        memory = self.encode(src, pad)
        prefix = torch.full((len(rows), 1), BOS_ID, dtype=torch.long, device=dev)
        done = [False] * len(rows)
        for _ in range(max_len):
            logits = self.decode(memory, prefix, memory_key_padding_mask=pad)[:, -1]
            # As probformer: log-softmax in float64, the first maximum.
            best = torch.log_softmax(logits.double(), dim=-1).argmax(dim=-1)
            for r, i in enumerate(rows):
                if done[r]:
                    continue
                tok = int(best[r])
                if tok == EOS_ID:
                    done[r] = True
                else:
                    out[i].append(tok)
            if all(done):
                break
            prefix = torch.cat([prefix, best[:, None]], dim=1)
        return out


class SetMAB(nn.Module):
    """layers.MAB, the Multihead Attention Block of Set Transformer:

        Q' = X W_q + b_q,  H = LN0(Q' + [head_1 … head_h]),
        head_i = softmax(Q'_i (Y W_k + b_k)_iᵀ / √(dim/heads) + mask) (Y W_v + b_v)_i,
        MAB(X, Y) = LN1(H + ReLU(H W_o + b_o)),

    with no projection after the heads and LN only with layer_norm
    (eps 1e-5). Masked keys get weight 0; a query that sees no key reads
    out 0, as probformer's fused attention."""

    def __init__(self, dim_q, dim_k, dim, heads, layer_norm):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.q = nn.Linear(dim_q, dim)
        self.k = nn.Linear(dim_k, dim)
        self.v = nn.Linear(dim_k, dim)
        self.o = nn.Linear(dim, dim)
        self.ln0 = nn.LayerNorm(dim, eps=1e-5) if layer_norm else None
        self.ln1 = nn.LayerNorm(dim, eps=1e-5) if layer_norm else None

    def forward(self, x, y, key_mask=None):
        """x [B, N, dq], y [B, M, dk], key_mask [B, M] (True or 1 at a real
        element) or None → [B, N, dim]."""
        b, n, m, h = x.size(0), x.size(1), y.size(1), self.heads
        dh = self.dim // h
        qp = self.q(x)
        q = qp.view(b, n, h, dh).transpose(1, 2)
        k = self.k(y).view(b, m, h, dh).transpose(1, 2)
        v = self.v(y).view(b, m, h, dh).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(dh)  # [B, h, N, M]
        if key_mask is not None:
            visible = key_mask.bool()[:, None, None, :]
            scores = scores.masked_fill(~visible, float("-inf"))
            w = torch.softmax(scores, dim=-1)
            w = torch.where(visible.any(dim=-1, keepdim=True), w, torch.zeros_like(w))
        else:
            w = torch.softmax(scores, dim=-1)
        heads = (w @ v).transpose(1, 2).reshape(b, n, self.dim)
        hid = qp + heads
        if self.ln0 is not None:
            hid = self.ln0(hid)
        out = hid + torch.relu(self.o(hid))
        if self.ln1 is not None:
            out = self.ln1(out)
        return out


class SetSAB(nn.Module):
    """layers.SAB: SAB(X) = MAB(X, X), the set's mask masking the keys."""

    def __init__(self, dim_in, dim, heads, layer_norm):
        super().__init__()
        self.mab = SetMAB(dim_in, dim_in, dim, heads, layer_norm)

    def forward(self, x, mask=None):
        return self.mab(x, x, mask)


class SetISAB(nn.Module):
    """layers.ISAB: ISAB(X) = MAB1(X, MAB0(I, X)) with learned inducing
    points I [m, dim]; MAB0 masks the set's padded keys, MAB1 none."""

    def __init__(self, dim_in, dim, heads, inducing, layer_norm):
        super().__init__()
        self.inducing = nn.Parameter(torch.zeros(inducing, dim))
        self.mab0 = SetMAB(dim, dim_in, dim, heads, layer_norm)
        self.mab1 = SetMAB(dim_in, dim, dim, heads, layer_norm)

    def forward(self, x, mask=None):
        i = self.inducing.unsqueeze(0).expand(x.size(0), -1, -1)
        return self.mab1(x, self.mab0(i, x, mask))


class SetPMA(nn.Module):
    """layers.PMA: PMA(X) = MAB(S, X) with learned seeds S [k, dim]."""

    def __init__(self, dim_in, dim, heads, seeds, layer_norm):
        super().__init__()
        self.seeds = nn.Parameter(torch.zeros(seeds, dim))
        self.mab = SetMAB(dim, dim_in, dim, heads, layer_norm)

    def forward(self, x, mask=None):
        return self.mab(self.seeds.unsqueeze(0).expand(x.size(0), -1, -1), x, mask)


class ProbformerSetTransformer(nn.Module):
    """probformer's layers.SetTransformer (task maxnorm), softmax
    scaled_dot attention:

        Z = Block_L(… Block_1(X))          SAB or ISAB blocks (enc.<i>)
        O = head(SAB?(PMA(Z)))              [B, seeds, dim_out]

    forward(x, mask) returns O, [B, seeds, dim_out]; predict(x, mask) is
    the maxnorm task's prediction, O's mean over the seeds axis,
    [B, dim_out]. x is [B, N, dim_in]; mask [B, N] holds 1 (True) for a
    real element and 0 for padding (None: no padding); padded rows change
    nothing for the real ones. Keyword arguments are the export's
    pytorch_config metadata."""

    def __init__(self, dim_in, dim, heads, dim_out, encoder="isab", blocks=2, inducing=16, seeds=1,
                 decoder_sab=False, layer_norm=True):
        super().__init__()
        if encoder not in ("sab", "isab"):
            raise ValueError("encoder must be sab or isab, is %r" % (encoder,))
        enc, width = [], dim_in
        for _ in range(blocks):
            if encoder == "isab":
                enc.append(SetISAB(width, dim, heads, inducing, layer_norm))
            else:
                enc.append(SetSAB(width, dim, heads, layer_norm))
            width = dim
        self.enc = nn.ModuleList(enc)
        self.pma = SetPMA(width, dim, heads, seeds, layer_norm)
        self.sab = SetSAB(dim, dim, heads, layer_norm) if decoder_sab else None
        self.head = nn.Linear(dim, dim_out)

    def forward(self, x, mask=None):
        h = x
        for block in self.enc:
            h = block(h, mask)
        z = self.pma(h, mask)
        if self.sab is not None:
            z = self.sab(z)
        return self.head(z)

    @torch.no_grad()
    def predict(self, x, mask=None):
        """The maxnorm prediction: forward's mean over the seeds, [B, dim_out]."""
        return self.forward(x, mask).mean(dim=1)


class Vocab:
    """An export's vocabulary (src_vocab or tgt_vocab metadata)."""

    def __init__(self, meta):
        v = json.loads(meta) if isinstance(meta, str) else meta
        self.tokens, self.lowercase = v["tokens"], v["lowercase"]
        self.unk_id, self.pad_id = v["unk_id"], v["pad_id"]
        self.bos_id, self.eos_id = v["bos_id"], v["eos_id"]
        self.index = {w: i for i, w in enumerate(self.tokens)}

    def encode(self, line):
        """A line's ids: lowercased if the model was trained so, split on whitespace."""
        if self.lowercase:
            line = line.lower()
        return [self.index.get(w, self.unk_id) for w in line.split()]

    def decode(self, ids):
        """Words of ids up to the first <eos>, without <pad> and <bos>."""
        words = []
        for i in ids:
            if i == self.eos_id:
                break
            if i in (self.pad_id, self.bos_id):
                continue
            words.append(self.tokens[i] if 0 <= i < len(self.tokens) else self.tokens[self.unk_id])
        return words


_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """(tensors, metadata) of a safetensors file, with json, struct and numpy."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, e in header.items():
        lo, hi = e["data_offsets"]
        arr = np.frombuffer(data[lo:hi], dtype=np.dtype(_DTYPES[e["dtype"]]).newbyteorder("<"))
        tensors[name] = torch.from_numpy(arr.astype(arr.dtype.newbyteorder("="))).reshape(e["shape"])
    return tensors, meta


def _export_task(meta):
    if meta.get("task"):
        return meta["task"]
    if meta.get("pytorch_module") == "probformer_torch.ProbformerSetTransformer":
        return "maxnorm"
    return "seq2seq"


def from_export(path, device="cpu"):
    """The model of a `trainer export --format pytorch` file, in eval mode
    and the export's dtype, and its source and target vocabularies: a
    seq2seq export gives (ProbformerSeq2Seq, Vocab, Vocab), a maxnorm one
    (ProbformerSetTransformer, None, None)."""
    state, meta = read_safetensors(path)
    task = _export_task(meta)
    cls = ProbformerSetTransformer if task == "maxnorm" else ProbformerSeq2Seq
    model = cls(**json.loads(meta["pytorch_config"]))
    model.to(dtype=state["head.weight" if task == "maxnorm" else "src_emb.weight"].dtype)
    model.load_state_dict(state, strict=True)
    model.to(device).eval()
    if task == "maxnorm":
        return model, None, None
    model.load_state_dict(state, strict=True)
    model.to(device).eval()
    return model, Vocab(meta["src_vocab"]), Vocab(meta["tgt_vocab"])


def translate(model, src_vocab, tgt_vocab, lines):
    """Greedy translations of text lines, as `trainer translate` gives them."""
    return [" ".join(tgt_vocab.decode(ids)) for ids in model.greedy([src_vocab.encode(l) for l in lines])]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 probformer_torch.py MODEL.safetensors < sentences (maxnorm: < sets.json)")
    m, sv, tv = from_export(sys.argv[1])
    if isinstance(m, ProbformerSetTransformer):
        # Standard input: {"x": [B][N][dim_in], "mask": [B][N] (optional)};
        # standard output: the predictions [B][dim_out] as JSON.
        req = json.load(sys.stdin)
        dt = m.head.weight.dtype
        x = torch.tensor(req["x"], dtype=torch.float64).to(dt)
        mask = torch.tensor(req["mask"]) > 0 if req.get("mask") is not None else None
        print(json.dumps(m.predict(x, mask).double().tolist()))
    else:
        for t in translate(m, sv, tv, sys.stdin.read().splitlines()):
            print(t)
