"""The model zoo's architectures: Hugging Face models built from tiny configs (random
init, no weights), one training case each, by family. tests/models/zoo.py runs them.

Every config is made deterministic in train mode: every dropout, drop-path, LayerDrop and
SpecAugment probability is zero (`_still`), since eager's random draws are not ours. The
MoE models' float64 reference runs transformers' loop over the experts (`_loop_experts`).
Text
models read 2 x 32 token ids from a vocabulary of 128; images are 2 x 3 x 32 x 32;
speech is 2 x 400 samples (wav2vec2, HuBERT) or 2 x 16 mel bins x 32 frames (Whisper).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from training_suite import Case, _hf_loss

VOCAB, SEQ, BATCH = 128, 32, 2
# A config field holding one of these names is a probability of a random draw.
_RANDOM = ("dropout", "pdrop", "drop_path", "layerdrop", "drop_connect", "mask_time_prob",
           "mask_feature_prob", "jitter", "dropout_rate")


def _still(cfg: Any) -> Any:
    """The config with every random draw's probability set to zero (nested ones too)."""
    for key, value in list(vars(cfg).items()):
        if isinstance(value, float) and any(r in key for r in _RANDOM):
            setattr(cfg, key, 0.0)
        elif isinstance(value, dict) and "attn_pdrop" in value:  # MPT's attn_config
            value["attn_pdrop"] = 0.0
    return cfg


def _tf() -> Any:
    import transformers

    return transformers


def _ids() -> torch.Tensor:
    return torch.randint(3, VOCAB, (BATCH, SEQ))


def _loop_experts(model: torch.nn.Module) -> None:
    """transformers' MoE experts run grouped_mm, which takes no float64: the float64
    reference runs their loop over the experts instead (the same function)."""
    model.set_experts_implementation("eager")  # type: ignore[operator]


def _lm(model: str, config: str, **kw: Any) -> Callable[[], Case]:
    """A masked or causal language model: the loss of its own labels."""
    def make() -> Case:
        tf = _tf()
        cfg = _still(getattr(tf, config)(vocab_size=VOCAB, **kw))
        ids = _ids()
        moe = "num_experts_per_tok" in kw
        return Case(model, getattr(tf, model)(cfg), {"input_ids": ids, "labels": ids},
                    _hf_loss, _loop_experts if moe else None)
    return make


def _seq2seq(model: str, config: str, **kw: Any) -> Callable[[], Case]:
    """An encoder-decoder: labels shifted into the decoder's inputs by the model."""
    def make() -> Case:
        tf = _tf()
        cfg = _still(getattr(tf, config)(vocab_size=VOCAB, pad_token_id=0, eos_token_id=1,
                                         decoder_start_token_id=2, **kw))
        return Case(model, getattr(tf, model)(cfg),
                    {"input_ids": _ids(), "labels": torch.randint(3, VOCAB, (BATCH, 16))},
                    _hf_loss)
    return make


def _image(model: str, config: str, labels: tuple[int, ...] = (BATCH,), size: int = 32,
           **kw: Any) -> Callable[[], Case]:
    """An image model with its loss: classes of the batch, or a class per pixel."""
    def make() -> Case:
        tf = _tf()
        cfg = _still(getattr(tf, config)(num_labels=10, **kw))
        return Case(model, getattr(tf, model)(cfg),
                    {"pixel_values": torch.randn(BATCH, 3, size, size),
                     "labels": torch.randint(0, 10, labels)}, _hf_loss)
    return make


_BERTISH = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=128, max_position_embeddings=64)
_DECODER = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=64)
_GQA = dict(_DECODER, num_key_value_heads=2)
_MOE = dict(_GQA, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64)
_BART = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
             decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
             max_position_embeddings=64)
_CONV_AUDIO = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=64, conv_dim=(32, 32), conv_stride=(5, 2),
                   conv_kernel=(10, 3), num_feat_extract_layers=2,
                   num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, vocab_size=32)


def _ctc(model: str, config: str) -> Callable[[], Case]:
    """Speech to characters: CTC over the frames of 400 samples (79 frames)."""
    def make() -> Case:
        tf = _tf()
        cfg = _still(getattr(tf, config)(**_CONV_AUDIO, ctc_loss_reduction="mean"))
        return Case(model, getattr(tf, model)(cfg),
                    {"input_values": torch.randn(BATCH, 400),
                     "labels": torch.randint(1, 32, (BATCH, 12))}, _hf_loss)
    return make


def _whisper() -> Case:
    tf = _tf()
    cfg = _still(tf.WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, d_model=32,
                                  encoder_layers=1, decoder_layers=1,
                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                  encoder_ffn_dim=64, decoder_ffn_dim=64,
                                  max_source_positions=16, max_target_positions=32,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=1,
                                  decoder_start_token_id=2, begin_suppress_tokens=None))
    return Case("whisper", tf.WhisperForConditionalGeneration(cfg),
                {"input_features": torch.randn(BATCH, 16, 32),
                 "labels": torch.randint(3, VOCAB, (BATCH, 12))}, _hf_loss)


# name -> (family, builder)
MODELS: dict[str, tuple[str, Callable[[], Case]]] = {
    # encoders
    "bert": ("encoder", _lm("BertForMaskedLM", "BertConfig", **_BERTISH)),
    "roberta": ("encoder", _lm("RobertaForMaskedLM", "RobertaConfig", **_BERTISH,
                               pad_token_id=1)),
    "distilbert": ("encoder", _lm("DistilBertForMaskedLM", "DistilBertConfig", dim=64,
                                  n_layers=2, n_heads=4, hidden_dim=128,
                                  max_position_embeddings=64)),
    "albert": ("encoder", _lm("AlbertForMaskedLM", "AlbertConfig", **_BERTISH,
                              embedding_size=32)),
    "electra": ("encoder", _lm("ElectraForMaskedLM", "ElectraConfig", **_BERTISH,
                               embedding_size=32)),
    "deberta_v2": ("encoder", _lm("DebertaV2ForMaskedLM", "DebertaV2Config", **_BERTISH)),
    "mpnet": ("encoder", _lm("MPNetForMaskedLM", "MPNetConfig", **_BERTISH)),
    # decoders: learned positions, ALiBi, rotary, GQA, sliding windows, soft-capping
    "gpt2": ("decoder", _lm("GPT2LMHeadModel", "GPT2Config", n_layer=2, n_embd=64, n_head=4,
                            n_positions=64, bos_token_id=0, eos_token_id=0)),
    "gpt_neo_local": ("decoder", _lm("GPTNeoForCausalLM", "GPTNeoConfig", hidden_size=64,
                                     num_layers=2, num_heads=4, max_position_embeddings=64,
                                     attention_types=[[["global", "local"], 1]],
                                     window_size=8)),
    "gptj": ("decoder rotary", _lm("GPTJForCausalLM", "GPTJConfig", n_embd=64, n_layer=2,
                                   n_head=4, rotary_dim=8, n_positions=64)),
    "gpt_neox": ("decoder rotary", _lm("GPTNeoXForCausalLM", "GPTNeoXConfig", **_DECODER)),
    "opt": ("decoder", _lm("OPTForCausalLM", "OPTConfig", hidden_size=64, num_hidden_layers=2,
                           num_attention_heads=4, ffn_dim=128, word_embed_proj_dim=64,
                           max_position_embeddings=64, pad_token_id=1)),
    "bloom_alibi": ("decoder alibi", _lm("BloomForCausalLM", "BloomConfig", hidden_size=64,
                                         n_layer=2, n_head=4)),
    "mpt_alibi": ("decoder alibi", _lm("MptForCausalLM", "MptConfig", d_model=64,
                                       n_heads=4, n_layers=2, max_seq_len=64)),
    "falcon_alibi": ("decoder alibi", _lm("FalconForCausalLM", "FalconConfig",
                                          hidden_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, alibi=True)),
    "llama_gqa": ("decoder rotary gqa", _lm("LlamaForCausalLM", "LlamaConfig", **_GQA)),
    "mistral_sliding": ("decoder rotary gqa sliding",
                        _lm("MistralForCausalLM", "MistralConfig", **_GQA, sliding_window=8)),
    "qwen2": ("decoder rotary gqa", _lm("Qwen2ForCausalLM", "Qwen2Config", **_GQA)),
    "gemma": ("decoder rotary", _lm("GemmaForCausalLM", "GemmaConfig", **_GQA, head_dim=16)),
    "gemma2_softcap": ("decoder rotary gqa sliding",
                       _lm("Gemma2ForCausalLM", "Gemma2Config", **_GQA, head_dim=16,
                           sliding_window=8, query_pre_attn_scalar=16)),
    "phi": ("decoder rotary", _lm("PhiForCausalLM", "PhiConfig", **_DECODER)),
    "phi3": ("decoder rotary", _lm("Phi3ForCausalLM", "Phi3Config", **_GQA, pad_token_id=0)),
    "starcoder2": ("decoder rotary gqa", _lm("Starcoder2ForCausalLM", "Starcoder2Config",
                                             **_GQA)),
    "olmo": ("decoder rotary", _lm("OlmoForCausalLM", "OlmoConfig", **_DECODER,
                                   pad_token_id=0)),
    "stablelm": ("decoder rotary", _lm("StableLmForCausalLM", "StableLmConfig", **_GQA)),
    # mixtures of experts
    "mixtral": ("decoder moe", _lm("MixtralForCausalLM", "MixtralConfig", **_GQA,
                                   num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": ("decoder moe", _lm("Qwen2MoeForCausalLM", "Qwen2MoeConfig", **_MOE,
                                     shared_expert_intermediate_size=64)),
    "olmoe": ("decoder moe", _lm("OlmoeForCausalLM", "OlmoeConfig", **_MOE, pad_token_id=0)),
    # encoder-decoders
    "t5": ("encoder-decoder", _seq2seq("T5ForConditionalGeneration", "T5Config", d_model=64,
                                       d_kv=16, d_ff=128, num_layers=2, num_heads=4)),
    "bart": ("encoder-decoder", _seq2seq("BartForConditionalGeneration", "BartConfig",
                                         **_BART)),
    "pegasus": ("encoder-decoder", _seq2seq("PegasusForConditionalGeneration",
                                            "PegasusConfig", **_BART)),
    "marian": ("encoder-decoder", _seq2seq("MarianMTModel", "MarianConfig", **_BART)),
    # vision
    "vit": ("vision", _image("ViTForImageClassification", "ViTConfig", image_size=32,
                             patch_size=8, hidden_size=64, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=128)),
    "swin": ("vision", _image("SwinForImageClassification", "SwinConfig", image_size=32,
                              patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                              window_size=4)),
    "convnext": ("vision", _image("ConvNextForImageClassification", "ConvNextConfig",
                                  hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)),
    # 64 x 64: at 32 its last stages are 1 x 1, a batch norm over two values (ill-conditioned)
    "mobilenet_v2": ("vision", _image("MobileNetV2ForImageClassification",
                                      "MobileNetV2Config", size=64, image_size=64,
                                      depth_multiplier=0.25, finegrained_output=False)),
    # initializer_range 1: at 0.02 the BatchNorm scales (drawn with it) shrink every block
    # ~50x, to activations of 1e-33 and gradients of 1e-100 at the top
    "efficientnet": ("vision", _image("EfficientNetForImageClassification",
                                      "EfficientNetConfig", size=64, image_size=64,
                                      width_coefficient=0.25, depth_coefficient=0.25,
                                      hidden_dim=320, initializer_range=1.0)),
    "segformer": ("vision", _image("SegformerForSemanticSegmentation", "SegformerConfig",
                                   labels=(BATCH, 32, 32), num_encoder_blocks=2,
                                   depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                   num_attention_heads=[1, 2], patch_sizes=[7, 3],
                                   strides=[4, 2], mlp_ratios=[2, 2],
                                   decoder_hidden_size=32)),
    "resnet": ("vision", _image("ResNetForImageClassification", "ResNetConfig",
                                embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])),
    # speech
    "wav2vec2": ("audio", _ctc("Wav2Vec2ForCTC", "Wav2Vec2Config")),
    "hubert": ("audio", _ctc("HubertForCTC", "HubertConfig")),
    "whisper": ("audio encoder-decoder", _whisper),
}


def build(name: str) -> Case:
    """The case of `name`, its weights and inputs drawn from seed 0."""
    torch.manual_seed(0)
    return MODELS[name][1]()
