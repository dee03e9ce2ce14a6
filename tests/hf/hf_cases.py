"""The nine models of check_hf.py: four made from sizes and five from the published config.json
of the models people download (tests/hf/fixtures, shrunk), each with the config transformers
builds it from and the model keys autoloco-train gets for it."""

import json
import os

import transformers
from transformers import GPT2Config, LlamaConfig

VOCAB = 256  # the byte corpus
SEQ_LEN = 32


class Case:
    def __init__(self, name, arch, tied, n_kv_head=4, norm_eps=1e-5, rope_theta=10000.0,
                 ffn_hidden=None):
        self.name, self.arch, self.tied = name, arch, tied
        self.n_layer, self.d_model, self.n_head = 2, 64, 4
        self.n_kv_head, self.norm_eps, self.rope_theta = n_kv_head, norm_eps, rope_theta
        self.ffn_hidden = ffn_hidden

    def hf_config(self):
        if self.arch == "gpt2":
            return GPT2Config(vocab_size=VOCAB, n_positions=SEQ_LEN, n_embd=self.d_model,
                              n_layer=self.n_layer, n_head=self.n_head,
                              activation_function="gelu_new", layer_norm_epsilon=self.norm_eps,
                              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                              bos_token_id=None, eos_token_id=None,
                              tie_word_embeddings=self.tied)
        return LlamaConfig(vocab_size=VOCAB, hidden_size=self.d_model,
                           intermediate_size=self.ffn_hidden, num_hidden_layers=self.n_layer,
                           num_attention_heads=self.n_head, num_key_value_heads=self.n_kv_head,
                           max_position_embeddings=SEQ_LEN, rms_norm_eps=self.norm_eps,
                           rope_parameters={"rope_type": "default",
                                            "rope_theta": self.rope_theta},
                           tie_word_embeddings=self.tied)

    def model_keys(self):
        """autoloco-train's model keys for this model."""
        keys = {"model.arch": self.arch, "model.n_layer": self.n_layer,
                "model.d_model": self.d_model, "model.n_head": self.n_head,
                "model.seq_len": SEQ_LEN, "model.vocab_size": VOCAB,
                "model.norm_eps": self.norm_eps,
                "model.tie_embeddings": "true" if self.tied else "false"}
        if self.arch == "llama":
            keys.update({"model.n_kv_head": self.n_kv_head, "model.rope_theta": self.rope_theta,
                         "model.ffn_hidden": self.ffn_hidden})
        return keys


class FixtureCase:
    """A model of the family from tests/hf/fixtures/NAME.json, as published but shrunk."""

    def __init__(self, name):
        self.name, self.arch = name, "llama"
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", name + ".json")
        with open(path) as f:
            self.fields = json.load(f)
        j = self.fields
        self.tied = j.get("tie_word_embeddings", False)
        self.n_layer = j["num_hidden_layers"]
        self.rope_theta = float(j.get("rope_theta", 10000.0))
        self.dcs = 2  # a short run across 2 dcs

    def hf_config(self):
        fields = {k: v for k, v in self.fields.items()
                  if k not in ("architectures", "transformers_version", "torch_dtype")}
        return transformers.AutoConfig.for_model(**fields)

    def model_keys(self):
        j = self.fields
        keys = {"model.arch": "llama", "model.n_layer": j["num_hidden_layers"],
                "model.d_model": j["hidden_size"], "model.n_head": j["num_attention_heads"],
                "model.n_kv_head": j["num_key_value_heads"], "model.seq_len": SEQ_LEN,
                "model.vocab_size": j["vocab_size"], "model.norm_eps": j["rms_norm_eps"],
                "model.tie_embeddings": "true" if self.tied else "false",
                "model.rope_theta": self.rope_theta, "model.ffn_hidden": j["intermediate_size"],
                "model.family": j["model_type"]}
        if j.get("head_dim", j["hidden_size"] // j["num_attention_heads"]) * \
                j["num_attention_heads"] != j["hidden_size"]:
            keys["model.head_dim"] = j["head_dim"]
        if j["model_type"] == "qwen2" or j.get("attention_bias"):
            keys["model.attention_bias"] = "true"
        if j["model_type"] == "qwen3":
            keys["model.qk_norm"] = "true"
        scaling = j.get("rope_scaling")
        if scaling:
            keys["model.rope_scaling"] = scaling.get("rope_type", scaling.get("type"))
            keys["model.rope_factor"] = scaling["factor"]
            if keys["model.rope_scaling"] == "llama3":
                keys["model.rope_low_freq_factor"] = scaling["low_freq_factor"]
                keys["model.rope_high_freq_factor"] = scaling["high_freq_factor"]
                keys["model.rope_original_seq_len"] = scaling["original_max_position_embeddings"]
        return keys


CASES = [
    Case("gpt2-tied", "gpt2", tied=True),
    Case("gpt2-untied", "gpt2", tied=False, norm_eps=1e-6),
    Case("llama-tied", "llama", tied=True, n_kv_head=4, norm_eps=1e-6, ffn_hidden=96),
    Case("llama-gqa-untied", "llama", tied=False, n_kv_head=2, norm_eps=1e-5,
         rope_theta=500000.0, ffn_hidden=160),
    FixtureCase("llama-3.2-1b"),
    FixtureCase("qwen2.5-0.5b"),
    FixtureCase("qwen3-0.6b"),
    FixtureCase("smollm2-135m"),
    FixtureCase("mistral-7b-v0.3"),
]
