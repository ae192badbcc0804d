#!/bin/bash
# A Megatron-LM launch of Llama-2-70B on 16 servers of 8 GPUs (TP 8, PP 4), in the
# style of Megatron-LM's examples/ scripts: `designer evaluate --from-megatron THIS`.
#SBATCH --nodes=16
GPUS_PER_NODE=8
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes ${SLURM_NNODES:-1}
)
GPT_MODEL_ARGS=(
    --num-layers 80      # llama2-70b
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention --num-query-groups 8
    --swiglu --untie-embeddings-and-output-weights
    --position-embedding-type rope --normalization RMSNorm --norm-epsilon 1e-5
    --disable-bias-linear --attention-dropout 0.0 --hidden-dropout 0.0
    --seq-length 4096 --max-position-embeddings 4096 --vocab-size 32000
)
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 1024
    --train-iters 100000
    --recompute-activations
    --bf16
)
export CUDA_DEVICE_MAX_CONNECTIONS=1
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    ${GPT_MODEL_ARGS[@]} ${TRAINING_ARGS[@]} \
    --tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --sequence-parallel \
    --use-distributed-optimizer --data-path $DATA_PATH --lr 3e-4
