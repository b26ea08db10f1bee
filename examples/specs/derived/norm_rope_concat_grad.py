"""NormRopeConcatGrad derived from NormRopeConcat (specs/norm_rope_concat.py): the gradients of the query, key and
value streams (main and encoder) and of the norm weights and biases, from the three output gradients, the inputs
the derivative reads, the RoPE tables and the saved per-row mean and rstd (given where the forward outputs them:
is_training; without them the statistics are recomputed). Compare the hand-written specs/norm_rope_concat_grad.py."""

from opgen.dsl import derive_grad
spec = derive_grad("../../../specs/norm_rope_concat.py", "NormRopeConcatGrad", aclnn="aclnnNormRopeConcatBackward",
    wrt=["query", "key", "value", "encoder_query", "encoder_key", "encoder_value", "norm_query_weight", "norm_query_bias",
         "norm_key_weight", "norm_key_bias", "norm_added_query_weight", "norm_added_query_bias", "norm_added_key_weight",
         "norm_added_key_bias"],
    saved=[f"{p}_{w}" for p in ("norm_query", "norm_key", "norm_added_query", "norm_added_key") for w in ("mean", "rstd")],
    grads={"query_output": "grad_query_output", "key_output": "grad_key_output", "value_output": "grad_value_output"},
    names={"query": "grad_query", "key": "grad_key", "value": "grad_value", "encoder_query": "grad_encoder_query",
           "encoder_key": "grad_encoder_key", "encoder_value": "grad_encoder_value",
           "norm_query_weight": "grad_norm_query_weight", "norm_query_bias": "grad_norm_query_bias",
           "norm_key_weight": "grad_norm_key_weight", "norm_key_bias": "grad_norm_key_bias",
           "norm_added_query_weight": "grad_norm_added_query_weight", "norm_added_query_bias": "grad_norm_added_query_bias",
           "norm_added_key_weight": "grad_norm_added_key_weight", "norm_added_key_bias": "grad_norm_added_key_bias"})
