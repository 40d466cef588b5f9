#!/usr/bin/env python3
"""make-mtp-fixtures.py: a multi-token-prediction (MTP) layer for the tiny
Qwen3.5 and transformers' outputs of it, for tests/e2e/test_mtp.py. Run with
the reference venv (scripts/setup-ref-venv):

    ~/.cache/pasada/ref-venv/bin/python scripts/make-mtp-fixtures.py

    tests/fixtures/tiny/qwen35.mtp.safetensors  the mtp.* tensors a Qwen3.5
        checkpoint ships (mtp.fc, mtp.pre_fc_norm_embedding,
        mtp.pre_fc_norm_hidden, mtp.norm, mtp.layers.0.*: a full-attention
        decoder layer), F32, seeded normal values (the norms' w of 1 + w)
    tests/fixtures/tiny/qwen35.mtp.npz  per prompt i: ids<i>, and logits<i>,
        the MTP's logits of entries 0..n-2 and, as row n - 1, of one entry
        more as a second draft step makes it: the last entry's own output
        hidden state (after the MTP's norm) with its argmax token, at
        position n - 1

Entry j pairs the model's final hidden state at position j (after its last
norm) with the embedding of the token at j + 1, at position j:
    x = fc(cat(norm_e(embed(t[j+1])), norm_h(h[j])));  x = layer(x)
    logits = lm_head(norm(x))
computed here with transformers' own Qwen3_5DecoderLayer (a full-attention
layer, causal over the entries), its Qwen3_5RMSNorm for the four norms, and
the model's embedding, rotary embedding and lm_head on the folder that
tests/e2e/hf_folder.py writes from tests/fixtures/tiny/qwen35.gguf.
(transformers itself loads no MTP weights: the layer is assembled here.)"""
import pathlib
import sys
import tempfile

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "fixtures" / "tiny"
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from hf_folder import write_f32_folder, write_safetensors  # noqa: E402

from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm  # noqa: E402


def mtp_weights(cfg, seed=35):
    rng = np.random.default_rng(seed)
    E, H, KV, D, F = (cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                      cfg.intermediate_size)

    def w(*shape, scale=0.15):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    t = {"mtp.fc.weight": w(E, 2 * E),
         "mtp.pre_fc_norm_embedding.weight": w(E, scale=0.1),
         "mtp.pre_fc_norm_hidden.weight": w(E, scale=0.1),
         "mtp.norm.weight": w(E, scale=0.1)}
    p = "mtp.layers.0."
    t.update({p + "input_layernorm.weight": w(E, scale=0.1), p + "post_attention_layernorm.weight": w(E, scale=0.1),
              p + "self_attn.q_proj.weight": w(2 * H * D, E), p + "self_attn.k_proj.weight": w(KV * D, E),
              p + "self_attn.v_proj.weight": w(KV * D, E), p + "self_attn.o_proj.weight": w(E, H * D),
              p + "self_attn.q_norm.weight": w(D, scale=0.1), p + "self_attn.k_norm.weight": w(D, scale=0.1),
              p + "mlp.gate_proj.weight": w(F, E), p + "mlp.up_proj.weight": w(F, E),
              p + "mlp.down_proj.weight": w(E, F)})
    return t


def main():
    data = np.load(TINY / "qwen35.logits.npz")
    prompts = [data[k] for k in sorted(k for k in data if k.startswith("ids"))]
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_f32_folder(TINY / "qwen35.gguf", "qwen35", pathlib.Path(tmp) / "qwen35")
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        cfg = model.config
        t = mtp_weights(cfg)
        write_safetensors(TINY / "qwen35.mtp.safetensors", t)
        layer = Qwen3_5DecoderLayer(cfg, cfg.layer_types.index("full_attention")).eval()
        missing = layer.load_state_dict({k[len("mtp.layers.0."):]: torch.tensor(v) for k, v in t.items()
                                         if k.startswith("mtp.layers.0.")}, strict=True)
        assert not missing.missing_keys and not missing.unexpected_keys, missing

        def norm(name):
            n = Qwen3_5RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
            n.weight.data = torch.tensor(t[name])
            return n
        ne, nh, nf = norm("mtp.pre_fc_norm_embedding.weight"), norm("mtp.pre_fc_norm_hidden.weight"), \
            norm("mtp.norm.weight")
        fc = torch.nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=False)
        fc.weight.data = torch.tensor(t["mtp.fc.weight"])
        out = {}
        with torch.no_grad():
            for i, ids in enumerate(prompts):
                x = torch.tensor(np.asarray(ids, np.int64))[None]
                h = model.model(input_ids=x).last_hidden_state  # after the final norm
                n = x.shape[1] - 1
                z = fc(torch.cat([ne(model.model.embed_tokens(x[:, 1:])), nh(h[:, :-1])], -1))
                pos = torch.arange(n)
                pe = model.model.rotary_emb(z, pos.view(1, 1, -1).expand(3, 1, -1))
                mask = torch.full((n, n), float("-inf")).triu(1)[None, None]
                y = layer(z, position_embeddings=pe, attention_mask=mask, position_ids=pos[None])
                y = y[0] if isinstance(y, tuple) else y
                logits = model.lm_head(nf(y))[0]
                # a second draft step: entries 0..n-2 again, then the chained one
                nxt = logits[-1].argmax().reshape(1, 1)
                z2 = torch.cat([z, fc(torch.cat([ne(model.model.embed_tokens(nxt)), nh(nf(y[:, -1:]))], -1))], 1)
                pos2 = torch.arange(n + 1)
                pe2 = model.model.rotary_emb(z2, pos2.view(1, 1, -1).expand(3, 1, -1))
                mask2 = torch.full((n + 1, n + 1), float("-inf")).triu(1)[None, None]
                y2 = layer(z2, position_embeddings=pe2, attention_mask=mask2, position_ids=pos2[None])
                y2 = y2[0] if isinstance(y2, tuple) else y2
                logits = torch.cat([logits, model.lm_head(nf(y2[:, -1:]))[0]], 0)
                # the check of the check: the main model's logits are the committed fixture's
                main = model.lm_head(h)[0].numpy()
                ref = data[f"logits{i}"]
                assert np.abs(main - ref).max() <= 1e-4 * np.abs(ref).max(), "the folder is not the fixture model"
                out[f"ids{i}"] = np.asarray(ids, np.int32)
                out[f"logits{i}"] = logits.numpy().astype(np.float32)
        np.savez_compressed(TINY / "qwen35.mtp.npz", **out)
    print(f"wrote {TINY / 'qwen35.mtp.safetensors'} and {TINY / 'qwen35.mtp.npz'} ({len(prompts)} prompts)")


if __name__ == "__main__":
    main()
