/*
 * scenario.c: loads a scenario with libyaml's document API and walks it against one schema table.
 * The schema says, for every key, its type, whether it is required, its range and where the value
 * goes; unknown keys, duplicate keys, wrong types, missing fields and impossible values each get
 * their own message with the line of the offending node.
 */
#include "scenario.h"
#include "recipe.h"
#include "data.h"
#include "net/net.h"
#include "schema.h"
#include "memory.h"
#include "recompute.h"

#include <yaml.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include "incidents.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- schema ------------------------------------------------------------------------------- */


#define END {NULL, T_MAP, false, 0, 0, false, 0, 0, NULL, NULL, 0, NULL}
#define OFF(m) offsetof(rh_scenario, m)
/* fields of a list's items: offsets into the item's struct */
#define FOFF(m) offsetof(rh_scenario_fault, m)
#define COFF(m) offsetof(rh_scenario_change, m)
#define AOFF(m) offsetof(rh_scenario_cause, m)
#define NUM_AT(k, req, lo, open, hi, sc, o, doc) {k, T_NUM, req, lo, hi, open, sc, o, NULL, NULL, 0, doc}
#define INT_AT(k, req, lo, hi, o, doc) {k, T_INT, req, lo, hi, false, 1, o, NULL, NULL, 0, doc}
#define COUNT_AT(k, req, lo, hi, o, doc) {k, T_COUNT, req, lo, hi, false, 1, o, NULL, NULL, 0, doc}
#define ENUM_AT(k, req, ch, o, doc) {k, T_ENUM, req, 0, 0, false, 1, o, NULL, ch, 0, doc}
#define NUM(k, req, lo, open, hi, sc, m, doc) NUM_AT(k, req, lo, open, hi, sc, OFF(m), doc)
#define COUNT(k, req, lo, hi, m, doc) COUNT_AT(k, req, lo, hi, OFF(m), doc)
#define INT(k, req, lo, hi, m, doc) INT_AT(k, req, lo, hi, OFF(m), doc)
#define STR(k, req, m, doc) {k, T_STR, req, 0, 0, false, 1, OFF(m), NULL, NULL, 0, doc}
#define MAP(k, req, kids, doc) {k, T_MAP, req, 0, 0, false, 1, 0, kids, NULL, 0, doc}
#define MAP_FLAG(k, kids, m, doc) {k, T_MAP, false, 0, 0, false, 1, OFF(m), kids, NULL, 0, doc}
#define ENUM(k, ch, m, doc) ENUM_AT(k, false, ch, OFF(m), doc)
#define NAMES(k, ch, m, doc) {k, T_NAMES, false, 0, 0, false, 1, OFF(m), NULL, ch, 0, doc}
#define ITEMS(k, kids, which, doc) {k, T_ITEMS, false, 0, 0, false, 1, 0, kids, NULL, which, doc}
#define PRESET(k, req, kids, kind, doc) {k, T_PRESET, req, 0, 0, false, 1, 0, kids, NULL, kind, doc}
#define BOOL(k, m, doc) {k, T_BOOL, false, 0, 0, false, 1, OFF(m), NULL, NULL, 0, doc}

/* Presets: files of presets/<kind>/NAME.yaml, each a part of the scenario's `cluster:` (a node:
 * GPUs, links and NICs) or of its `cluster.gpu:`.  Their values come first; the scenario's own
 * keys override them. */
const char *const rh__preset_kinds[PRESET_KINDS] = {"node", "gpu", "network", "model",
                                                             "framework", "failures"};

static const char *const network_models[] = {"exact", "realistic", "nccl", NULL};
static const char *const transports[] = {"ib", "roce", "tcp", NULL};
static const char *const topologies[] = {"switch", "fat_tree", "rail", NULL};
static const char *const placements[] = {"packed", "scattered", NULL};
static const char *const model_kinds[] = {"timing", "softmax", "mlp", "net", NULL};
static const char *const data_sources[] = {"synthetic", "idx", "cifar10", "fashion-mnist", NULL};
static const char *const lr_scalings[] = {"size", "local_size", "none", NULL};
static const char *const optimizers[] = {"sgd", "adam", "adadelta", NULL};
static const char *const epochs_rules[] = {"fixed", "divided", NULL};
static const char *const steps_rules[] = {"divided", "full", "loader", NULL};
static const char *const val_rules[] = {"divided", "oversampled", "full", "none", NULL};
static const char *const booleans[] = {"false", "true", NULL};
static const char *const shuffles[] = {"false", "true", "torch", NULL};
static const char *const checkpoint_formats[] = {"full", "sharded", NULL};
static const char *const wrap_policies[] = {"transformer", "size", NULL};
static const char *const sample_shardings[] = {"distributed", "replicated", NULL};
/* recipe.sharding: the state's (rh_sharding's order), then the samples' older spelling (from
 * SAMPLES_AT: data.sharding's values) */
static const char *const shardings[] = {"none", "optimizer", "gradients", "hybrid", "full",
                                        "distributed", "replicated", NULL};
enum { SAMPLES_AT = RH_SHARD_COUNT };
static const char *const fault_links[] = {"uplink", "gpu", NULL};
static const char *const fault_phases[] = {"allreduce", "broadcast", "allgather", "commit",
                                           "sync", "rendezvous", "step", "reduce_scatter", NULL};
static const char *const restart_policies[] = {"none", "from_checkpoint", NULL};
static const char *const families[] = {"custom", "transformer", "cnn", NULL};
static const char *const activations[] = {"gelu", "swiglu", NULL};
static const char *const norms[] = {"layernorm", "rmsnorm", NULL};
static const char *const attentions[] = {"flash", "eager", NULL};
static const char *const data_parallels[] = {"horovod", "ddp", NULL};
static const char *const layouts[] = {"nchw", "nhwc", NULL};
static const char *const optimizer_kernels[] = {"per_tensor", "foreach", "fused", "per_tensor_fused",
                                                NULL};
static const char *const zero_grads[] = {"none", "memset", NULL};
static const char *const loaders[] = {"synthetic", "cpu", "dali_cpu", "dali_gpu", NULL};

static const field gpu_fields[] = {
    NUM("tflops", false, 0, true, 1e9, 1e12, cluster.gpu_flops,
        "sustained training FLOP/s of one GPU, measured on one model: the rate a model without "
        "shapes runs at (required unless the model is timed on the roofline)"),
    STR("tflops_measured_on", false, compute.tflops_model,
        "the model `tflops` was measured on; a run of another model at that rate says so"),
    STR("name", false, compute.gpu_name,
        "the GPU's name, for the outputs"),
    NUM("reduce_GBps", false, 0, false, 1e9, 1e9, cluster.reduce_bw,
        "local reduction rate; 0: free (fused into the copy, as NCCL does)"),
    ENUM("arch", rh_arch_names, cluster.fabric.arch,
        "(nccl) the GPU generation, for NCCL's ceilings"),
    NUM("nccl_slowdown", false, 0, false, 0.9, 1, cluster.nccl_slowdown,
        "share of the GPU that NCCL's kernels take while a collective runs"),
    NUM("step_spread", false, 0, false, 0.5, 1, compute.step_spread,
        "relative standard deviation of a GPU's step time; a step of N ranks waits for the "
        "slowest (its expected excess over the mean); 0: none"),
    NUM("peak_tflops", false, 0, false, 1e9, 1e12, compute.peak,
        "the roofline at the training precision, for any model with layers: dense peak; 0: none"),
    NUM("peak_tflops_fp32", false, 0, false, 1e9, 1e12, compute.peaks[RH_PREC_FP32],
        "dense fp32 peak (CUDA cores), for precision fp32"),
    NUM("peak_tflops_tf32", false, 0, false, 1e9, 1e12, compute.peaks[RH_PREC_TF32],
        "dense TF32 tensor-core peak, for precision tf32"),
    NUM("peak_tflops_fp16", false, 0, false, 1e9, 1e12, compute.peaks[RH_PREC_AMP_FP16],
        "dense fp16 tensor-core peak, for precision amp_fp16"),
    NUM("peak_tflops_bf16", false, 0, false, 1e9, 1e12, compute.peaks[RH_PREC_BF16],
        "dense bf16 tensor-core peak, for precision bf16"),
    NUM("peak_tflops_fp8", false, 0, false, 1e9, 1e12, compute.peaks[RH_PREC_FP8],
        "dense fp8 tensor-core peak, for precision fp8"),
    NUM("memory_GB", false, 0, true, 1e6, 1e9, compute.capacity,
        "the GPU's memory, for the memory check (fits_memory)"),
    NUM("memory_GBps", false, 0, false, 1e9, 1e9, compute.memory_bw,
        "memory bandwidth (bytes read and written): the roofline's memory-bound layers, and the "
        "copies of the gradients into and out of the buckets of a distributed step"),
    NUM("gemm_efficiency", false, 0.001, false, 1, 1, compute.gemm_efficiency,
        "the roofline: fraction of the peak that large GEMMs reach"),
    NUM("gemm_half_gflop", false, 0, false, 1e9, 1e9, compute.gemm_half,
        "the roofline: GEMM size at half that efficiency (smaller ones fall off)"),
    NUM("gemm_best", false, 0.001, false, 1, 1, compute.gemm_best,
        "the kernel model: the share of the tensor-core peak the best cuBLAS GEMM reaches "
        "(default: gemm_efficiency)"),
    NUM("gemm_best_fp32", false, 0.001, false, 1, 1, compute.gemm_best_fp32,
        "the kernel model: the same on the CUDA cores, fp32 (default: gemm_best)"),
    NUM("conv_efficiency_tf32", false, 0, true, 1, 1, compute.conv_eff_tf32,
        "the kernel model: cuDNN's TF32 convolutions' rate against cuBLAS's TF32 GEMMs' (0: 1)"),
    STR("kernel_table", false, compute.kernel_table,
        "the kernel model: a table `rehearsal-gpu kernels` measured on this GPU (its best GEMM of "
        "each precision, its copy rate, its launch), in place of the figures above; relative to "
        "the scenario, or to the presets (measured/NAME.txt)"),
    INT("sms", false, 1, 4096, compute.sms,
        "the kernel model: streaming multiprocessors, over which a GEMM's tiles run in waves"),
    NUM("kernel_floor_us", false, 0, false, 1e6, 1e-6, compute.kernel_floor,
        "the kernel model: the shortest a kernel takes on the GPU, back to back"),
    NUM("attention_fwd_tflops", false, 0, false, 1e6, 1e12, compute.attn_fwd,
        "the kernel model: fused attention's forward rate at long sequences (FlashAttention)"),
    NUM("attention_bwd_tflops", false, 0, false, 1e6, 1e12, compute.attn_bwd,
        "the kernel model: fused attention's backward rate at long sequences"),
    NUM("attention_seq_half", false, 0, false, 1e9, 1, compute.attn_seq_half,
        "the kernel model: the sequence length at which fused attention reaches half its rate"),
    PRESET("preset", false, NULL, PRESET_GPU,
        "a GPU preset (presets/gpu/) that the keys beside it override"),
    END};
static const field framework_fields[] = {
    STR("name", false, framework.name,
        "the framework's name, for the outputs"),
    ENUM("data_parallel", data_parallels, recipe.framework,
        "how gradients are bucketed: horovod (fusion threshold and cycle) or ddp (PyTorch "
        "DistributedDataParallel's fixed buckets)"),
    NUM("launch_us", false, 0, false, 1e6, 1e-6, framework.launch,
        "the kernel model: host time to issue one kernel (forward, optimizer)"),
    NUM("backward_launch_us", false, 0, false, 1e6, 1e-6, framework.backward_launch,
        "the kernel model: host time to issue one kernel in backward; 0: launch_us"),
    NUM("host_ms_per_step", false, 0, false, 1e6, 1e-3, framework.host_step,
        "the kernel model: the host's own work each step before its first kernel"),
    ENUM("layout", layouts, framework.layout,
        "convolutions' layout: nchw (tensor cores pay a transpose each way) or nhwc"),
    BOOL("fuse_bn_relu", framework.fuse_bn_relu,
        "batch norm, ReLU and a residual add between them in one kernel"),
    BOOL("fuse_bias_act", framework.fuse_bias_act,
        "a linear layer's activation in its GEMM's epilogue"),
    BOOL("fuse_dropout_add", framework.fuse_dropout_add,
        "dropout and the residual add in one kernel"),
    BOOL("fuse_norm", framework.fuse_norm,
        "the residual add in the norm's kernel after it"),
    BOOL("fuse_softmax", framework.fuse_softmax,
        "eager attention: scale, mask and softmax in one kernel"),
    BOOL("fuse_loss", framework.fuse_loss,
        "the loss and its gradient in one pass over the logits"),
    ENUM("optimizer", optimizer_kernels, framework.optimizer,
        "the optimizer's kernels: a loop over tensors (an op a kernel), foreach lists, fused over "
        "all tensors, or per_tensor_fused (one kernel a tensor)"),
    ENUM("zero_grad", zero_grads, framework.zero_grad,
        "gradients each step: set to None (none), or zeroed and accumulated into (memset)"),
    BOOL("amp_weight_casts", framework.amp_weight_casts,
        "mixed precision casts each weight every step, and its gradient back"),
    PRESET("preset", false, NULL, PRESET_FRAMEWORK,
        "a framework preset (presets/framework/) that the keys beside it override"),
    END};
static const field intra_fields[] = {
    NUM("bandwidth_GBps", true, 0, true, 1e9, 1e9, cluster.intra_bw,
        "GPU to node switch (NVLink/NVSwitch) per GPU and direction: what NCCL moves per GPU"),
    NUM("latency_us", false, 0, false, 1e9, 1e-6, cluster.intra_lat,
        "one hop inside the node"),
    NUM("backbone_GBps", false, 0, false, 1e9, 1e9, cluster.intra_backbone_bw,
        "the node's shared fabric (PCIe); 0: a non-blocking switch"),
    BOOL("nvlink", cluster.fabric.nvlink,
        "(nccl) GPUs on NVLink (false: PCIe; no LL128)"),
    BOOL("nvswitch", cluster.fabric.nvswitch,
        "(nccl) GPUs through NVSwitch (NVLS where nvls_efficiency > 0)"),
    NUM("nccl_cap_GBps", false, 0, false, 1e9, 1e9, cluster.fabric.intra_cap,
        "(nccl) NCCL's ceiling on a node's ring bandwidth (A100: 235); 0: none"),
    NUM("nvls_efficiency", false, 0, false, 1, 1, cluster.fabric.nvls_efficiency,
        "(nccl) NVLS algorithm bandwidth / bandwidth_GBps; 0: no NVLS"),
    NUM("pcie_GBps", false, 0, false, 1e9, 1e9, cluster.fabric.pcie_bw,
        "(nccl) a GPU's or NIC's PCIe slot; 0: not a limit"),
    INT("nccl_channels", false, 1, 64, cluster.fabric.channels,
        "(nccl) NCCL's channels"),
    END};
static const field network_fields[] = {
    INT("nics_per_node", false, 1, 64, cluster.nics_per_node,
        "NICs of a node: one per GPU is rail-optimised, one per node is shared"),
    NUM("nic_Gbps", true, 0, true, 1e9, 1e9 / 8, cluster.nic_bw,
        "one NIC's line rate, per direction"),
    NUM("latency_us", false, 0, false, 1e9, 1e-6, cluster.nic_lat,
        "one hop through the network"),
    ENUM("transport", transports, transport,
        "(nccl) the transport, for its efficiency when none is given (ib 0.96, roce 0.96, tcp "
        "0.65)"),
    NUM("efficiency", false, 0, true, 1, 1, cluster.fabric.nic_efficiency,
        "(nccl) fraction of the line rate the transport achieves"),
    ENUM("topology", topologies, cluster.fabric.topology,
        "how the nodes' NICs meet: switch (one non-blocking switch), fat_tree (leaves of "
        "nodes_per_leaf nodes joined by spines), rail (NIC k of every node on rail k's leaf, a leaf "
        "per rail and group of nodes_per_leaf nodes; one NIC per GPU)"),
    INT("nodes_per_leaf", false, 0, 1 << 20, cluster.fabric.nodes_per_leaf,
        "nodes under one leaf switch (fat_tree; rail: a group's nodes, each rail's leaf holding "
        "one NIC of each); under switch, the NCCL model's leaves only; 0: one switch"),
    NUM("oversubscription", false, 1, false, 1e3, 1, cluster.fabric.oversubscription,
        "a leaf's down/up bandwidth ratio: its uplinks to the spines carry 1/oversubscription of "
        "what its nodes can send (fat_tree, rail; the NCCL model: paid when the job spans leaves)"),
    ENUM("placement", placements, cluster.fabric.placement,
        "fat_tree, rail: packed (the job's nodes fill leaf after leaf) or scattered (node i on "
        "leaf i mod leaves: every neighbour on another leaf, as on a fragmented cluster)"),
    PRESET("preset", false, NULL, PRESET_NETWORK,
        "a network preset (presets/network/) that the keys beside it override"),
    END};
static const field storage_fields[] = {
    NUM("write_GBps", false, 0, true, 1e9, 1e9, storage.write_bw,
        "checkpoint writes; absent: free"),
    NUM("read_GBps", false, 0, true, 1e9, 1e9, storage.read_bw,
        "checkpoint reads (a relaunch's restore)"),
    NUM("latency_ms", false, 0, false, 1e6, 1e-3, storage.latency,
        "one storage operation"),
    END};
static const field cluster_fields[] = {
    INT("nodes", true, 1, 65536, cluster.nodes,
        "nodes the job starts on"),
    INT("spare_nodes", false, 0, 65536, cluster.spares,
        "nodes beyond `nodes` that a relaunch or host discovery may use"),
    MAP("storage", false, storage_fields,
        "where checkpoints go (absent: free)"),
    PRESET("node", false, NULL, PRESET_NODE,
        "a node preset (presets/node/): GPUs, links and NICs; the keys beside it override it"),
    INT("cpu_threads", false, 0, 1 << 20, compute.cpu_threads,
        "hardware threads of a node's CPUs, which feed its GPUs through data.loader (0: not known)"),
    {"gpus_per_node", T_SLOTS, true, 1, 1024, false, 1, 0, NULL, NULL, 0,
     "one number, or a list of one per node ([3, 2])"},
    PRESET("gpu", true, NULL, PRESET_GPU,
        "a GPU preset's name (gpu: h100-sxm), or a mapping of the keys below"),
    MAP("intra", true, intra_fields,
        "the links inside a node"),
    PRESET("network", false, NULL, PRESET_NETWORK,
        "the links between nodes (required when nodes > 1): a preset's name, or a mapping"),
    {"network_model", T_ENUM, false, 0, 0, false, 1, OFF(network_model), NULL, network_models, 0,
     "exact: SimGrid's analytic CM02 model; realistic: SimGrid's LV08 (its 13x latency over TCP "
     "alone); nccl: NCCL's own cost model, seconds where the other two take minutes at 512 GPUs. "
     "Default: nccl when any part of the cluster comes from a preset, exact otherwise"},
    END};
static const field model_fields[] = {
    ENUM("kind", model_kinds, model.kind,
        "timing (FLOPs and bytes); softmax, mlp or net: C models that train on real numbers"),
    INT("hidden", false, 1, 1 << 20, model.hidden,
        "mlp: hidden units"),
    ENUM("network", rh_net_names, model.network,
        "net: the convolutional network (docs/models.md; default mnist_net, the seeds' PyTorch Net): "
        "mnist_net, lenet5, keras_mnist_cnn, tf_mnist_cnn, keras_fmnist_cnn, keras_cifar10_cnn"),
    STR("name", false, model.name,
        "the model's name, for the outputs"),
    STR("init_from", false, model.init_from,
        "real models: the initial parameters, a params.bin as a run writes it (float32, "
        "little-endian, tensors in state_dict order), relative to the scenario file"),
    COUNT("parameters", false, 1, 1e15, model.parameters,
        "timing: the parameter count (one tensor), or give layers"),
    NUM("forward_gflops_per_sample", false, 0, true, 1e12, 1e9, model.forward_flops,
        "what the simulated GPU spends per sample forward (backward is twice that); a real "
        "model's own when absent"),
    NUM("framework_overhead_ms", false, 0, false, 1e9, 1e-3, compute.overhead,
        "the framework's own work per step, the GPU idle"),
    {"layers", T_LAYERS, false, 0, 0, false, 1, 0, NULL, NULL, 0,
     "timing: a list of {name, parameters, forward_gflops_per_sample, memory_MB_per_sample, "
     "traffic_per_sample, activations_per_sample}, in forward order (tools/torch_export.py writes "
     "one); transformer: the number of blocks"},
    PRESET("preset", false, NULL, PRESET_MODEL,
        "a model preset (presets/model/) that the keys beside it override"),
    ENUM("family", families, model.family,
        "custom (parameters or layers as written), transformer (from a Hugging Face config's "
        "figures) or cnn (a network by name)"),
    ENUM("precision", rh_precision_names, model.precision,
        "the GEMMs' rate, the activations' bytes and the gradients' bytes (fp32 and amp_fp16: "
        "fp32 gradients; bf16, fp8: bf16)"),
    INT("heads", false, 1, 1 << 16, model.tf.heads,
        "transformer: attention heads"),
    INT("kv_heads", false, 1, 1 << 16, model.tf.kv_heads,
        "transformer: key/value heads (grouped-query attention); default: heads"),
    INT("ffn", false, 1, 1 << 24, model.tf.ffn,
        "transformer: the MLP's inner width (intermediate_size); default 4 x hidden"),
    ENUM("activation", activations, model.tf.activation,
        "transformer: gelu (fc, proj) or swiglu (gate, up, down)"),
    INT("vocab", false, 1, 1 << 24, model.tf.vocab,
        "transformer: vocabulary size"),
    INT("seq_len", false, 1, 1 << 24, model.tf.seq_len,
        "transformer: tokens per sample"),
    INT("positions", false, 0, 1 << 24, model.tf.positions,
        "transformer: learned position embeddings (max_position_embeddings); 0: rotary"),
    INT("type_vocab", false, 0, 1 << 16, model.tf.type_vocab,
        "transformer: token-type embeddings (BERT: 2)"),
    BOOL("tied_embeddings", model.tf.tied_embeddings,
        "transformer: the output head shares the token embedding"),
    BOOL("decoder", model.tf.decoder,
        "transformer: a causal LM (pre-norm, LM head); false: a BERT-style encoder (pooler, MLM "
        "and NSP heads)"),
    BOOL("bias", model.tf.bias,
        "transformer: linear layers have biases"),
    ENUM("norm", norms, model.tf.norm,
        "transformer: layernorm or rmsnorm"),
    ENUM("attention", attentions, model.tf.attention,
        "transformer: flash (scores stay on chip) or eager (heads x s x s scores in memory)"),
    NUM("dropout", false, 0, false, 1, 1, model.tf.dropout,
        "transformer: the dropout rate of hidden states and attention probabilities (Hugging "
        "Face's hidden_dropout_prob); the kernel model runs its kernels; 0: none"),
    INT("mlm_predictions", false, 0, 1 << 24, model.tf.predictions,
        "encoder: tokens a sequence the masked-LM head runs on (max_predictions_per_seq); 0: all"),
    INT("image_size", false, 1, 1 << 16, model.image_size,
        "cnn: the input's side (default: the network's, 224; inception_v3 299)"),
    INT("channels", false, 1, 1 << 16, model.channels,
        "cnn: the input's channels (default: the network's)"),
    INT("classes", false, 1, 1 << 24, model.classes,
        "cnn: outputs of the classifier (default 1000; the seeds' networks 10)"),
    COUNT("tokens_per_sample", false, 1, 1e12, model.tokens_per_sample,
        "a sequence model's tokens per sample, for tokens/s (a transformer's is seq_len)"),
    END};
static const field data_fields[] = {
    ENUM("source", data_sources, data.source,
        "synthetic; idx (MNIST / Fashion-MNIST files, plain or gzip'd); cifar10 (its binary "
        "batches); fashion-mnist (Debian's dataset-fashion-mnist, its test set for validation)"),
    COUNT("train_samples", false, 1, 1e15, data.train,
        "training samples (required for synthetic; idx: all the file's images when absent)"),
    COUNT("validation_samples", false, 0, 1e15, data.validation,
        "validation samples"),
    INT("inputs", false, 1, 1 << 24, data.inputs,
        "synthetic: features per sample"),
    INT("classes", false, 2, 1 << 16, data.classes,
        "classes of the labels; idx: every label must be below it (absent: the largest label + 1); "
        "cifar10: 10"),
    NUM("noise", false, 0, false, 1e6, 1, data.noise,
        "synthetic: class overlap; unset: 0.28 sqrt(inputs) (about 93% for an MLP)"),
    COUNT("seed", false, 0, 1e15, data.seed,
        "synthetic data are drawn from it"),
    STR("train_images", false, data.train_images,
        "idx: the training images, relative to the scenario file; cifar10: a pattern of its "
        "batch files (data_batch_*.bin)"),
    STR("train_labels", false, data.train_labels,
        "idx: the training labels"),
    STR("validation_images", false, data.validation_images,
        "idx: the validation images; cifar10: test_batch.bin"),
    NUM("normalize_mean", false, -1e6, false, 1e6, 1, data.norm_mean,
        "images: subtracted after scaling to [0, 1] (torchvision's Normalize; MNIST 0.1307)"),
    NUM("normalize_std", false, 0, true, 1e6, 1, data.norm_std,
        "images: the divisor after the mean (MNIST 0.3081); absent: no normalisation"),
    STR("validation_labels", false, data.validation_labels,
        "idx: the validation labels"),
    ENUM("sharding", sample_shardings, recipe.sharding,
        "the samples: distributed (DistributedSampler: each rank its share), or replicated "
        "(every rank the whole set)"),
    ENUM("loader", loaders, data.loader,
        "the input pipeline a timing model's images go through: synthetic (none: the GPU never "
        "waits), cpu (PyTorch's DataLoader: JPEG decode and augmentation on the node's CPUs), "
        "dali_cpu (NVIDIA DALI on the CPUs), dali_gpu (decoded on the GPU: not a limit here)"),
    NUM("decode_per_thread", false, 0, true, 1e9, 1, data.decode_per_thread,
        "images a second one CPU thread decodes and augments (default: the loader's, "
        "docs/models.md); the node's cluster.cpu_threads share them out over its GPUs"),
    END};
static const field recipe_fields[] = {
    COUNT("batch_per_worker", true, 1, 1e8, recipe.batch,
        "samples per step on each worker"),
    NUM("base_lr", false, 0, true, 1e6, 1, recipe.base_lr,
        "the one-worker learning rate, scaled by lr_scaling"),
    COUNT("epochs", false, 1, 1e6, recipe.epochs,
        "epochs to train (required unless steps or duration says how long)"),
    COUNT("steps", false, 0, 1e15, recipe.steps,
        "global optimizer steps to run, whatever the data's size: as many epochs as they take, "
        "the last one cut (not with epochs or stop_at_step); 0: the epochs say"),
    {"duration", T_DURATION, false, 0, 1e10, false, 1, OFF(recipe.duration), NULL, NULL, 0,
     "simulated time to run (30d, 720h, 45m, 90s): every rank stops one step after the step "
     "that reaches it, or at the end of its epochs (default 1) if they come first; on the "
     "simulator; 0: no limit"},
    ENUM("lr_scaling", lr_scalings, recipe.lr_scaling,
        "size (lr x size), local_size, or none"),
    NUM("warmup_epochs", false, 0, false, 1e6, 1, recipe.warmup_epochs,
        "Horovod's LearningRateWarmupCallback over these epochs; 0: none"),
    {"lr_decay_epochs", T_DECAY, false, 0, 1e6, false, 1, 0, NULL, NULL, 0,
     "staircase decay at these epochs (a list; default: none)"},
    NUM("lr_decay_factor", false, 0, true, 1e6, 1, recipe.decay_factor,
        "each decay multiplies the lr by it"),
    ENUM("optimizer", optimizers, recipe.optimizer,
        "PyTorch's update rules"),
    NUM("momentum", false, 0, false, 1e3, 1, recipe.momentum,
        "sgd: momentum"),
    NUM("adam_beta1", false, 0, false, 0.999999, 1, recipe.beta1,
        "adam: beta1"),
    NUM("adam_beta2", false, 0, false, 0.999999999, 1, recipe.beta2,
        "adam: beta2"),
    NUM("epsilon", false, 0, false, 1, 1, recipe.eps,
        "adam, adadelta: epsilon"),
    NUM("adadelta_rho", false, 0, false, 1, 1, recipe.rho,
        "adadelta: rho"),
    ENUM("epochs_rule", epochs_rules, recipe.epochs_rule,
        "fixed, or divided: ceil(epochs / size)"),
    ENUM("steps_per_epoch", steps_rules, recipe.steps_rule,
        "divided: train/(batch x size); full: train/batch; loader: PyTorch's DistributedSampler "
        "and DataLoader"),
    ENUM("validation_steps", val_rules, recipe.val_rule,
        "divided: (val/batch)/size; oversampled: 3 x val/(batch x size); full: each rank its "
        "whole shard; none"),
    COUNT("stop_at_step", false, 0, 1e15, recipe.stop_at_step,
        "TensorFlow's StopAtStepHook: stop at step S // size; 0: no stop"),
    COUNT("seed", false, 0, 1e15, recipe.seed,
        "the initial weights and dropout are drawn from it (torch.manual_seed(args.seed)), and "
        "the order of shuffle: true unless sampler_seed is given"),
    COUNT("sampler_seed", false, 0, 1e15, recipe.sampler_seed,
        "the sampler's seed: DistributedSampler(seed=...), torch's default 0 under shuffle: torch "
        "(as DistributedSampler(dataset, num_replicas, rank) builds it); with shuffle: true, "
        "seed when unset"),
    ENUM("shuffle", shuffles, recipe.shuffle,
        "shuffle the samples each epoch: true (rehearsal's generator), or torch (torch.randperm "
        "seeded seed + epoch, DistributedSampler's order: the samples PyTorch's ranks see)"),
    COUNT("first_epoch", false, 0, 1e6, recipe.first_epoch,
        "the epoch number of the first epoch as the script counts (set_epoch(epoch) of PyTorch's "
        "examples: 0; Horovod's elastic MNIST, seed 001: 1); it seeds torch's order"),
    INT("checkpoint_every_epochs", false, 0, 1 << 20, recipe.checkpoint_every,
        "rank 0 writes a checkpoint every N epochs; 0: never"),
    ENUM("sharding", shardings, recipe.sharding_key,
        "the training state sharded over the data-parallel ranks: none (DDP, Horovod), "
        "optimizer (ZeRO-1: the optimizer's state and fp32 master copy), gradients (ZeRO-2, FSDP "
        "SHARD_GRAD_OP: and the gradients), hybrid (FSDP HYBRID_SHARD: everything, inside each "
        "node, the nodes replicas: its shards allreduced across them), full (ZeRO-3, FSDP "
        "FULL_SHARD: everything); distributed and replicated are data.sharding's older spelling.  "
        "The memory and the step are the sharded ones"),
    BOOL("reduce_scatter", recipe.reduce_scatter,
        "optimizer, gradients: the gradients reduce-scattered, each rank receiving its shard "
        "(DeepSpeed's zero_optimization.reduce_scatter, true); false: allreduced, then each rank "
        "updates its shard"),
    BOOL("overlap_comm", recipe.overlap_comm,
        "optimizer, gradients: each bucket's reduce-scatter starts in backward once it is full "
        "(DeepSpeed's overlap_comm; here true, DeepSpeed's default false: all after backward)"),
    COUNT("reduce_bucket_size", false, 1, 1e15, recipe.reduce_bucket,
        "optimizer, gradients: elements per reduce-scatter bucket (DeepSpeed's, 5e8)"),
    COUNT("allgather_bucket_size", false, 1, 1e15, recipe.allgather_bucket,
        "optimizer, gradients: elements per allgather of the updated parameters after the "
        "optimizer step (DeepSpeed's, 5e8)"),
    ENUM("checkpoint_format", checkpoint_formats, recipe.checkpoint_format,
        "full: the state gathered whole and written by rank 0 (FSDP's FULL_STATE_DICT); sharded: "
        "each rank writes its block of the parameters and the optimizer's state, rank 0 an index "
        "(SHARDED_STATE_DICT; hybrid: the first node's ranks), read back whole by a world of any "
        "size (optimizer, gradients, hybrid and full sharding)"),
    INT("shard_group_size", false, 0, 1 << 30, recipe.shard_group,
        "hybrid: the GPUs of a shard group, whole nodes that divide the job's GPUs (the shard "
        "dimension of HSDP's DeviceMesh, DeepSpeed's mics_shard_size); the groups replicate the "
        "state; 0: the GPUs of a node"),
    ENUM("wrap_policy", wrap_policies, recipe.wrap_policy,
        "full, hybrid: FSDP's auto_wrap_policy, how the model is cut into units: transformer "
        "(transformer_auto_wrap_policy: each transformer block a unit, the default), size "
        "(size_based_auto_wrap_policy: a module a unit once the parameters under it that no "
        "deeper unit took reach min_num_params; lists of blocks are never wrapped); what no unit "
        "takes is the root unit, gathered whole for the step"),
    COUNT("min_num_params", false, 1, 1e15, recipe.min_num_params,
        "wrap_policy: size: the parameters a module needs to be a unit (PyTorch's default 1e8)"),
    BOOL("limit_all_gathers", recipe.limit_all_gathers,
        "full: FSDP's rate limiter, at most two units' allgathers in flight (the next unit's "
        "while this one computes, true); false: every unit's issued as the pass begins"),
    ENUM("activation_checkpointing", rh_recompute_names, recipe.recompute,
        "none; selective (Megatron-LM: each block's attention core recomputed in backward); full "
        "(each transformer block, as checkpoint_wrapper: only its input kept, its forward run "
        "again in backward)"),
    COUNT("validation_batch", false, 1, 1e8, recipe.val_batch,
        "the batch of validation steps (default: batch_per_worker)"),
    COUNT("checkpoint_every_steps", false, 0, 1e12, recipe.checkpoint_every_steps,
        "a checkpoint every N steps as well; 0: none between epochs' ends"),
    PRESET("framework", false, NULL, PRESET_FRAMEWORK,
        "the framework (presets/framework/: pytorch, pytorch-amp-nhwc, torch-compile, tensorflow, "
        "mxnet, mxnet-fused, megatron, llmc; horovod and ddp as before): its data parallelism, the "
        "kernels it fuses, how it launches them, its optimizer; a name or a mapping"),
    NUM("bucket_cap_mb", false, 0, true, 1e6, 1048576, recipe.bucket_cap,
        "ddp: bucket_cap_mb (MiB, as DDP counts it)"),
    NUM("first_bucket_mb", false, 0, true, 1e6, 1048576, recipe.first_bucket,
        "ddp: the first bucket's cap (DDP's 1 MiB)"),
    COUNT("gradient_accumulation", false, 1, 1e6, recipe.accumulation,
        "micro-batches of batch_per_worker per step; the allreduce runs in the last one's "
        "backward (DDP's no_sync)"),
    NUM("reducer_ms_per_GB", false, 0, false, 1e6, 1e-12, recipe.reducer_per_byte,
        "the framework's own work on the gradients as they become ready, per GB of them, in a "
        "step of two ranks or more (DDP's hooks and bucket copies), the GPU idle; 0: none"),
    END};

/* failures: scripted events and random failures */
enum { ITEMS_EVENTS = 1, ITEMS_CHANGES = 2, ITEMS_CAUSES = 3 };
static const field event_fields[] = {
    ENUM_AT("kind", true, rh_fault_names, FOFF(kind),
        "what happens"),
    INT_AT("node", false, 0, 1 << 20, FOFF(node),
        "0-based; spares follow the job's nodes"),
    INT_AT("gpu", false, 0, 1024, FOFF(gpu),
        "required for gpu_crash, hang and a gpu link; a straggler without it is the whole node; "
        "refused for host_crash and uplink faults"),
    ENUM_AT("link", false, fault_links, FOFF(link),
        "link faults: uplink (the node's NICs) or gpu (its NVLink/PCIe link)"),
    NUM_AT("at_s", false, 0, false, 1e12, 1, FOFF(at_s),
        "trigger: a simulated time"),
    COUNT_AT("epoch", false, 1, 1e6, FOFF(epoch),
        "trigger: rank 0 beginning this epoch (1-based), at `step` or its first"),
    COUNT_AT("step", false, 1, 1e12, FOFF(step),
        "trigger: the step of `epoch` (1-based)"),
    ENUM_AT("during", false, fault_phases, FOFF(during),
        "then at the first such phase after the trigger"),
    NUM_AT("after_ms", false, 0, false, 1e12, 1, FOFF(after_ms),
        "this much after the trigger or phase (alone: from the start)"),
    NUM_AT("duration_s", false, 0, true, 1e12, 1, FOFF(duration_s),
        "windowed kinds (link faults, stragglers): how long; absent: for good"),
    NUM_AT("factor", false, 0, true, 1, 1, FOFF(factor),
        "link_degraded: bandwidth x factor; straggler: speed x factor (at least 1e-6: slower "
        "is a hang)"),
    NUM_AT("extra_latency_us", false, 0, false, 1e12, 1, FOFF(extra_latency_us),
        "link_degraded: latency added, at most 1e6 (with it, factor may be left out)"),
    END};
static const field cause_fields[] = {
    {"name", T_STR, true, 0, 0, false, 1, AOFF(name), NULL, NULL, 0,
     "the cause, as the log names it (faulty_gpu, hbm3, nic...)"},
    ENUM_AT("per", true, rh_cause_scope_names, AOFF(per),
        "what its rate is counted per: gpu, node or job"),
    NUM_AT("count", false, 0, false, 1e12, 1, AOFF(count),
        "failures in the log of failures.exposure (its rate: count / (units x hours))"),
    NUM_AT("mtbf_hours", false, 0, true, 1e15, 1, AOFF(mtbf_hours),
        "or: the mean hours between failures of one unit"),
    NUM_AT("at_hours", false, 0, false, 1e9, 1, AOFF(at_hours),
        "or: one failure at this hour of the replay (scripted)"),
    ENUM_AT("detection", true, rh_detection_names, AOFF(detection),
        "how it is noticed: exit (the launcher's poll), heartbeat, timeout (the collective "
        "watchdog), checksum (at the next checkpoint), planned (drained with a checkpoint)"),
    ENUM_AT("takes_out", false, rh_takes_out_names, AOFF(takes_out),
        "gpu or node (a spare must replace it), link or job (a relaunch mends it); default: "
        "its scope's"),
    NUM_AT("detect_s", false, 0, true, 1e9, 1, AOFF(detect_s),
        "seconds until it is noticed, where this cause has its own (an inspection's, a log "
        "analyser's); default: its detection's restart key"),
    NUM_AT("diagnosis_s", false, 0, false, 1e9, 1, AOFF(diagnosis_s),
        "seconds to find and evict its culprit, where this cause has its own; default: "
        "restart.diagnosis_s"),
    END};
static const field exposure_fields[] = {
    NUM("gpus", false, 0, true, 1e9, 1, failures.exposure_gpus, "GPUs of the log"),
    NUM("nodes", false, 0, true, 1e9, 1, failures.exposure_nodes, "nodes of the log"),
    NUM("hours", false, 0, true, 1e9, 1, failures.exposure_hours, "hours the log covers"),
    END};
static const field failure_fields[] = {
    PRESET("preset", false, NULL, PRESET_FAILURES,
        "a failure log's causes (presets/failures/NAME.yaml); the scenario's keys override it"),
    COUNT("seed", false, 0, 1e15, failures.seed,
        "random failures are drawn from it: the same run every time"),
    NUM("horizon_days", false, 0, true, 36500, 86400, failures.horizon_s,
        "the replay at scale: this much wall time of the job, its failures drawn from `causes`, "
        "at the run's pace (the run itself is a sample of the job's steps)"),
    STR("source", false, failures.source,
        "where the causes' figures come from"),
    MAP("exposure", false, exposure_fields,
        "the log the causes' counts come from: its GPUs, nodes and hours"),
    ITEMS("causes", cause_fields, ITEMS_CAUSES,
        "failure causes: each a rate, a detection and what it takes out"),
    NAMES("only_per", rh_cause_scope_names, failures.only_per,
        "keep only the causes counted per these units (gpu, node, job): [gpu, node] takes a "
        "log's hardware to another job, leaving its software and maintenance behind"),
    NUM("gpu_mtbf_hours", false, 0, true, 1e12, 1, failures.gpu_mtbf_h,
        "mean time between failures of one GPU; absent: none"),
    NUM("node_mtbf_hours", false, 0, true, 1e12, 1, failures.node_mtbf_h,
        "mean time between failures of one node (all its GPUs); absent: none"),
    ITEMS("events", event_fields, ITEMS_EVENTS,
        "scripted failures: a trigger, then what happens"),
    END};
static const field change_fields[] = {
    NUM_AT("at_s", true, 0, false, 1e12, 1, COFF(at_s),
        "when the discovery script gives this answer"),
    INT_AT("add", false, 0, 1 << 20, COFF(add),
        "hosts added (spare nodes, in order)"),
    INT_AT("remove", false, 0, 1 << 20, COFF(remove),
        "the node removed"),
    END};
static const field elastic_fields[] = {
    INT("min_np", false, 1, 1 << 24, elastic.min_np,
        "below it the job ends, reported (default: the starting size)"),
    INT("max_np", false, 1, 1 << 24, elastic.max_np,
        "ranks fill hosts up to it (absent: no limit)"),
    COUNT("commit_every_steps", false, 1, 1e12, elastic.commit_every,
        "state.commit() when the global step is a multiple of N, and at each epoch's end"),
    NUM("rendezvous_s", false, 0, false, 1e9, 1, elastic.rendezvous_s,
        "re-forming the world (the driver's poll and the new Gloo context)"),
    NUM("rendezvous_timeout_s", false, 0, true, 1e9, 1, elastic.rendezvous_timeout_s,
        "a member that does not come within it failed (HOROVOD_GLOO_TIMEOUT_SECONDS)"),
    NUM("timeout_s", false, 0, false, 1e9, 1, elastic.timeout_s,
        "waiting for min_np slots (HOROVOD_ELASTIC_TIMEOUT)"),
    NUM("worker_start_s", false, 0, false, 1e9, 1, elastic.worker_start_s,
        "a new worker's start on an added host"),
    NUM("discovery_interval_s", false, 0, false, 1e9, 1, elastic.discovery_interval_s,
        "how often the host discovery script is read"),
    NUM("commit_GBps", false, 0, false, 1e9, 1e9, elastic.commit_bw,
        "the state's copy to host memory at each commit"),
    ITEMS("discovery", change_fields, ITEMS_CHANGES,
        "the discovery script's answers over time: hosts added, then removed"),
    END};
static const field restart_fields[] = {
    ENUM("policy", restart_policies, restart.policy,
        "none, or from_checkpoint: a scheduler's requeue from rank 0's last checkpoint"),
    NUM("relaunch_s", false, 0, false, 1e9, 1, restart.relaunch_s,
        "from a failure to the relaunched job's start"),
    INT("max_restarts", false, 0, 1 << 20, restart.max_restarts,
        "relaunches before the job is given up"),
    NUM("exit_poll_s", false, 0, false, 1e6, 1, restart.exit_poll_s,
        "at scale: a process that exits is seen at the launcher's next poll (torchrun's "
        "--monitor_interval, 5 s)"),
    NUM("heartbeat_timeout_s", false, 0, true, 1e6, 1, restart.heartbeat_timeout_s,
        "at scale: a silent host is declared dead after it (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, 480 s)"),
    NUM("collective_timeout_s", false, 0, true, 1e6, 1, restart.collective_timeout_s,
        "at scale: a hung collective is noticed after it (PyTorch's NCCL process-group "
        "timeout, 10 min)"),
    NUM("diagnosis_s", false, 0, false, 1e6, 1, restart.diagnosis_s,
        "at scale: finding and evicting the bad node before the relaunch"),
    INT("spare_nodes", false, -1, 1 << 24, restart.spare_nodes,
        "at scale: hot spare nodes (-1: a node is always free); a failed one is repaired in "
        "repair_hours"),
    NUM("repair_hours", false, 0, true, 1e6, 3600, restart.repair_s,
        "at scale: a failed node's time back into the spares"),
    NUM("init_ms_per_rank", false, 0, false, 1e6, 1e-3, restart.init_per_rank_s,
        "at scale: the communicator's set-up per rank of the job (MegaScale: under 30 s at "
        "over 10,000 GPUs)"),
    NUM("checkpoint_every_minutes", false, 0, true, 1e9, 60, restart.checkpoint_every_s,
        "at scale: training time between checkpoints (default: the recipe's "
        "checkpoint_every_steps at the run's pace)"),
    BOOL("checkpoint_async", restart.checkpoint_async,
        "at scale: training waits only for the copy to host memory; the write overlaps it"),
    NUM("snapshot_GBps", false, 0, true, 1e9, 1e9, restart.snapshot_bw,
        "at scale, async: each GPU's copy of its shard of the state to host memory"),
    END};
static field check_fields[RH_CHECK_COUNT + 8]; /* one switch per check, then the options */
static field collective_fields[RH_SETTING_COUNT + 1]; /* filled from the settings table */
static const field top_fields[] = {
    STR("name", true, name,
        "the scenario's name, for the outputs"),
    STR("description", false, description,
        "free text"),
    MAP("cluster", true, cluster_fields,
        "the simulated cluster: nodes, GPUs, links"),
    PRESET("model", true, NULL, PRESET_MODEL,
        "what each step computes, and the size of its gradients: a mapping, or a model preset's "
        "name (presets/model/)"),
    MAP("data", true, data_fields,
        "the samples"),
    MAP("recipe", true, recipe_fields,
        "batch, learning rate, optimizer, epochs, checkpoints"),
    MAP("collective", false, collective_fields,
        "the runtime's settings (units allowed: 64MiB, 30s, 500ms)"),
    MAP("checks", false, check_fields,
        "real models: every check on unless set false here"),
    NAMES("mistakes", rh_mistake_names, mistakes,
        "recipe mistakes to make on purpose, each caught by its check"),
    MAP("failures", false, failure_fields,
        "random and scripted failures"),
    MAP_FLAG("elastic", elastic_fields, elastic.present,
        "hvd.elastic.run: a failure shrinks the world; absent: a failure stops the job"),
    MAP_FLAG("restart", restart_fields, restart.present,
        "a fixed-size job relaunched from its checkpoint (not with elastic)"),
    {"sweep", T_SWEEP, false, 0, 0, false, 1, 0, NULL, NULL, 0,
     "`rehearsal sweep`'s axes: KEY: [values]"},
    END};

static void init_collective_fields(void) {
  for (int i = 0; i < RH_SETTING_COUNT; i++)
    collective_fields[i] = (field){rh__setting_defs[i].name, T_SETTING, false, 0, 0, false, 1, 0,
                                   NULL, NULL, i, rh__setting_defs[i].doc};
  collective_fields[RH_SETTING_COUNT] = (field)END;
  for (int i = 0; i < RH_CHECK_COUNT; i++)
    check_fields[i] = (field)ENUM(rh_check_names[i], booleans, checks.enabled[i],
                                  "the check of this name, on where it applies: false turns it off");
  check_fields[RH_CHECK_COUNT] =
      (field)COUNT("serial_check_steps", false, 0, 1e15, checks.serial_steps,
                   "serial_equivalence: compare with the serial replica for the first N steps; 0: all");
  check_fields[RH_CHECK_COUNT + 1] =
      (field)INT("resume_from_epoch", false, 0, 1 << 20, checks.resume_from_epoch,
                 "resume_equivalence: resume from this epoch's checkpoint (turns the check on)");
  check_fields[RH_CHECK_COUNT + 2] =
      (field)NAMES("expect_fail", rh_check_names, checks.expect_fail,
                   "checks this scenario expects to fail: it exits 0 when exactly these do");
  check_fields[RH_CHECK_COUNT + 3] =
      (field)NUM("interval_tolerance_percent", false, 0, false, 100, 0.01, checks.interval_tolerance,
                 "commit_interval: the time lost beyond Young's interval's that passes");
  check_fields[RH_CHECK_COUNT + 4] =
      (field)NUM("accuracy_within_points", false, 0, false, 100, 1, checks.accuracy_within,
                 "accuracy_parity: how far below one worker's final validation accuracy passes "
                 "(points; default 1)");
  check_fields[RH_CHECK_COUNT + 5] =
      (field)STR("accuracy_baseline", false, checks.accuracy_baseline,
                 "accuracy_parity: a one-worker run's summary.json to compare with (relative to "
                 "the scenario), or a pattern naming several, a seed each (base/seed-*/summary.json); "
                 "absent: the recipe runs on one GPU beside the job, kept in --out DIR/baseline "
                 "and reused while the scenario and the program are the same");
  check_fields[RH_CHECK_COUNT + 6] =
      (field)INT("accuracy_baseline_seeds", false, 1, 100, checks.accuracy_seeds,
                 "accuracy_parity: one-GPU baseline runs, each with its own recipe.seed and "
                 "sampler_seed; their spread widens the bound to t sd sqrt(1 + 1/n) (docs/commands.md)");
  check_fields[RH_CHECK_COUNT + 7] = (field)END;
}

/* ---- defaults and the schema, for the reference ------------------------------------------- */

void rh__scenario_defaults(rh_scenario *sc) {
  sc->cluster.intra_lat = 0.7e-6; /* NVLink/NVSwitch hop, NCCL's LL figure */
  sc->cluster.nic_lat = 5e-6;
  sc->cluster.nics_per_node = 1;
  sc->network_model = -1; /* exact, or nccl where the cluster is written from presets */
  sc->cluster.fabric = (rh_fabric){.arch = RH_ARCH_AMPERE, .nvlink = true, .channels = 16,
                                   .oversubscription = 1};
  sc->recipe.base_lr = 0.01;
  sc->recipe.bucket_cap = 25 * 1048576.0;  /* DDP's bucket_cap_mb */
  sc->recipe.first_bucket = 1048576.0;     /* DDP's first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES) */
  sc->recipe.accumulation = 1;
  sc->recipe.reduce_scatter = true;     /* DeepSpeed's zero_optimization defaults */
  sc->recipe.overlap_comm = true;
  sc->recipe.reduce_bucket = 5e8;
  sc->recipe.allgather_bucket = 5e8;
  sc->recipe.limit_all_gathers = true;  /* FSDP's default */
  sc->recipe.min_num_params = 1e8;      /* size_based_auto_wrap_policy's default */
  sc->model.hidden = 64;
  sc->model.tf.decoder = true;
  sc->model.tf.bias = true;
  sc->compute.peak_from = -1;
  /* without recipe.framework the kernels are PyTorch's eager ones (presets/framework/pytorch.yaml,
   * whose sources say where each figure comes from; test_kernels holds the two equal), and the
   * gradients go in Horovod's fused rounds, as before frameworks had profiles */
  sc->framework = (rh_framework){.launch = 8e-6, .backward_launch = 3.7e-6,
                                 .optimizer = RH_OPT_FOREACH, .amp_weight_casts = true};
  sc->data.inputs = 784;
  sc->data.classes = 10;
  sc->data.noise = -1;
  sc->data.seed = 1;
  sc->recipe.decay_factor = 0.1;
  sc->recipe.beta1 = 0.9;
  sc->recipe.beta2 = 0.999;
  sc->recipe.eps = 1e-8;
  sc->recipe.rho = 0.9;
  sc->recipe.seed = 42;
  sc->recipe.sampler_seed = -1; /* unset: 0 under shuffle: torch, else recipe.seed */
  sc->recipe.shuffle = 1;
  sc->recipe.checkpoint_every = 1;
  sc->failures.seed = 1;
  sc->checks.interval_tolerance = 0.01; /* one point of the job's time */
  sc->checks.accuracy_within = 1;       /* one point of accuracy */
  sc->checks.accuracy_seeds = 5;        /* baseline runs: enough for a spread */
  sc->elastic.commit_every = 1;         /* the OCI recipe commits every batch */
  sc->elastic.rendezvous_s = 1;         /* discovery polled every second */
  sc->elastic.rendezvous_timeout_s = 30; /* HOROVOD_GLOO_TIMEOUT_SECONDS */
  sc->elastic.timeout_s = 600;          /* HOROVOD_ELASTIC_TIMEOUT */
  sc->elastic.worker_start_s = 10;
  sc->elastic.discovery_interval_s = 1;
  sc->elastic.commit_bw = 25e9;         /* the state copied to host memory over PCIe 4 x16 */
  sc->restart.policy = 1;
  sc->restart.relaunch_s = 60;
  sc->restart.max_restarts = 3;
  sc->restart.exit_poll_s = 5;             /* torchrun --monitor_interval (PyTorch 1.13: 5 s) */
  sc->restart.heartbeat_timeout_s = 480;   /* TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC */
  sc->restart.collective_timeout_s = 600;  /* PyTorch's NCCL process group: 10 min */
  sc->restart.spare_nodes = -1;
  sc->restart.init_per_rank_s = 0.003;     /* MegaScale: under 30 s at over 10,000 GPUs */
  sc->restart.snapshot_bw = 25e9;          /* as elastic.commit_GBps: PCIe 4 x16 */
  for (int i = 0; i < RH_CHECK_COUNT; i++) sc->checks.enabled[i] = -1;
}

const field *rh__scenario_schema(void) {
  init_collective_fields();
  return top_fields;
}

const field *rh__scenario_preset_fields(const field *f) {
  if (f->type != T_PRESET || !strcmp(f->key, "node") || !strcmp(f->key, "preset")) return NULL;
  return f->setting == PRESET_GPU         ? gpu_fields
         : f->setting == PRESET_MODEL     ? model_fields
         : f->setting == PRESET_FRAMEWORK ? framework_fields
         : f->setting == PRESET_FAILURES  ? failure_fields
                                          : network_fields;
}

/* ---- walking ----------------------------------------------------------------------------- */

typedef struct walker {
  yaml_document_t *doc;
  const yaml_node_t *key; /* key of the value being walked: the line for a collection's errors */
  rh_scenario *sc;
  char *base;             /* where field offsets point into: the scenario, or a list's item */
  const char *path;
  char *err;
  size_t errlen;
  bool failed;
  /* keys a preset gave (dotted names), so that the scenario need not repeat required ones */
  struct provided {
    int n, nfiles;
    char names[96][160];
    int line[96];            /* where the preset gives names[i] */
    signed char file[96];    /* its file: files[file[i]], or -1 past the table */
    char files[16][512];
  } *provided;
  int depth;              /* presets within presets */
  const char *const *sets; /* the command line's overrides, for their errors */
  bool cluster_only;      /* model, data and recipe are not required */
  bool model_only;        /* only the name and the model are required */
  bool real_target;       /* real processes: no key that needs the simulator's clock */
} walker;

/* The worst a degradation may be: a straggler at a millionth of its speed, a link at a millionth
 * of its bandwidth or a second slower a message.  Beyond, the component is dead. */
#define RH_FAULT_FACTOR_MIN 1e-6
#define RH_FAULT_EXTRA_LATENCY_MAX_US 1e6

/* Nodes a command-line override adds carry a line past any file's (SET_LINE + the override's
 * index), so that an error in one names the override instead of a line of the file. */
#define SET_LINE 0x40000000

static bool was_provided(const walker *w, const char *name) {
  for (int i = 0; w->provided && i < w->provided->n; i++)
    if (strcmp(w->provided->names[i], name) == 0) return true;
  return false;
}

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

/* Notes that the preset being walked gives key `name` at key node k, for a later cross-field
 * error to name the preset's file and line. */
static void note_provided(walker *w, const char *name, const yaml_node_t *k) {
  struct provided *p = w->provided;
  if (!p || p->n >= 96) return;
  int f = p->nfiles - 1;
  if (f < 0 || strcmp(p->files[f], w->path) != 0) {
    f = p->nfiles < 16 ? p->nfiles++ : -1;
    if (f >= 0) snprintf(p->files[f], sizeof p->files[f], "%s", w->path);
  }
  snprintf(p->names[p->n], sizeof p->names[0], "%s", name);
  p->line[p->n] = line_of(k);
  p->file[p->n++] = (signed char)f;
}

/* The preset file and line that last gave key `name`, or NULL. */
static const char *provided_at(const walker *w, const char *name, int *line) {
  for (int i = w->provided ? w->provided->n : 0; i-- > 0;)
    if (strcmp(w->provided->names[i], name) == 0 && w->provided->file[i] >= 0) {
      *line = w->provided->line[i];
      return w->provided->files[w->provided->file[i]];
    }
  return NULL;
}

static void fail(walker *w, const yaml_node_t *n, const char *where, const char *fmt, ...) {
  if (w->failed) return;
  w->failed = true;
  /* a mapping or list starts on the line after its key: point at the key */
  if (n && n->type != YAML_SCALAR_NODE && w->key) n = w->key;
  int len;
  if (n && n->start_mark.line >= SET_LINE && w->sets)
    len = snprintf(w->err, w->errlen, "--set %s: %s: ", w->sets[n->start_mark.line - SET_LINE], where);
  else
    len = snprintf(w->err, w->errlen, "%s:%d: %s: ", w->path, n ? line_of(n) : 1, where);
  va_list ap;
  va_start(ap, fmt);
  if (len >= 0 && (size_t)len < w->errlen) vsnprintf(w->err + len, w->errlen - (size_t)len, fmt, ap);
  va_end(ap);
}

static const char *type_word(const yaml_node_t *n) {
  switch (n->type) {
  case YAML_MAPPING_NODE: return "a mapping";
  case YAML_SEQUENCE_NODE: return "a list";
  default: return "a scalar";
  }
}

static const char *scalar(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

static bool parse_number(const char *s, double *out) {
  if (!*s) return false;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (*end || errno || !isfinite(v)) return false;
  *out = v;
  return true;
}

/* Both bounds, always: "a number > 0" for a value above the maximum would contradict itself. */
static void describe_range(char *buf, size_t len, const field *f, bool integer) {
  const char *what = integer ? "an integer" : "a number";
  if (f->max >= 1e9)
    snprintf(buf, len, "%s %s %.15g and <= %.15g", what, f->min_open ? ">" : ">=", f->min, f->max);
  else if (f->min_open)
    snprintf(buf, len, "%s > %.15g and <= %.15g", what, f->min, f->max);
  else
    snprintf(buf, len, "%s from %.15g to %.15g", what, f->min, f->max);
}

/* Parses a number scalar for f, checking type and range. */
static bool number_value(walker *w, const yaml_node_t *n, const field *f, const char *name,
                         double *out) {
  char range[96];
  bool integer = f->type == T_INT || f->type == T_SLOTS || f->type == T_COUNT;
  describe_range(range, sizeof range, f, integer);
  if (n->type != YAML_SCALAR_NODE) {
    fail(w, n, name, "expected %s, got %s", range, type_word(n));
    return false;
  }
  double v;
  if (!parse_number(scalar(n), &v) || (integer && v != floor(v))) {
    fail(w, n, name, "expected %s, got \"%s\"", range, scalar(n));
    return false;
  }
  if (v < f->min || v > f->max || (f->min_open && v == f->min)) {
    fail(w, n, name, "%s is out of range: expected %s", scalar(n), range);
    return false;
  }
  *out = v;
  return true;
}

/* A duration in seconds: a number, or one with a unit (s, m, h, d: 90s, 45m, 720h, 30d). */
static bool duration_value(walker *w, const yaml_node_t *n, const field *f, const char *name,
                           double *out) {
  static const struct { const char *unit; double s; } units[] = {
      {"", 1}, {"s", 1}, {"m", 60}, {"min", 60}, {"h", 3600}, {"d", 86400}};
  const char *text = n->type == YAML_SCALAR_NODE ? scalar(n) : "";
  char *end = NULL;
  double v = n->type == YAML_SCALAR_NODE && *text ? strtod(text, &end) : NAN;
  double scale = 0;
  for (size_t i = 0; end && end != text && i < sizeof units / sizeof units[0]; i++)
    if (strcmp(end, units[i].unit) == 0) scale = units[i].s;
  if (!(scale > 0) || !isfinite(v)) {
    fail(w, n, name, "expected a duration: seconds, or a number with a unit (90s, 45m, 720h, "
                     "30d), got %s%s%s", n->type == YAML_SCALAR_NODE ? "\"" : "",
         n->type == YAML_SCALAR_NODE ? text : type_word(n), n->type == YAML_SCALAR_NODE ? "\"" : "");
    return false;
  }
  v *= scale;
  if (v < f->min || v > f->max) {
    fail(w, n, name, "%s is out of range: expected 0 to %g s (%g days)", text, f->max, f->max / 86400);
    return false;
  }
  *out = v;
  return true;
}

/* ---- reading a YAML file ---------------------------------------------------------------------- */

/* libyaml's parser takes time quadratic in the depth of flow nesting ([ and {): 20,000 levels
 * take seconds, 100,000 do not finish.  A scenario has a few levels; these bounds keep a hostile
 * or broken file from holding the tool (block nesting is bounded by the size: 1,400 levels fit in
 * a MiB, and parse in milliseconds). */
enum { YAML_MAX_BYTES = 4 << 20, YAML_MAX_FLOW_DEPTH = 64 };

/* The line where `text` nests [ and { deeper than YAML_MAX_FLOW_DEPTH (outside quotes and
 * comments), or 0. */
static int too_deep(const char *text, size_t len) {
  int depth = 0, line = 1;
  char quote = 0;
  bool comment = false;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (c == '\n') {
      line++;
      comment = false;
      continue;
    }
    if (comment) continue;
    if (quote) {
      if (quote == '"' && c == '\\' && i + 1 < len) i++;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n'))
      comment = true;
    else if ((c == '"' || c == '\'') &&
             (i == 0 || strchr(" \t\n[{,:", text[i - 1]) != NULL))
      quote = c;
    else if ((c == '[' || c == '{') && ++depth > YAML_MAX_FLOW_DEPTH)
      return line;
    else if ((c == ']' || c == '}') && depth > 0)
      depth--;
  }
  return 0;
}

int rh_open_regular(const char *path, const char *mode, FILE **f, struct stat *st) {
  *f = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    return 1;
  }
  /* a regular file never blocks, but its reads should wait as usual */
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || !(*f = fdopen(fd, mode))) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return 0;
}

const char *rh_not_regular(const struct stat *st) {
  mode_t m = st->st_mode;
  return S_ISDIR(m)                   ? "a directory"
         : S_ISFIFO(m)                ? "a FIFO"
         : S_ISCHR(m) || S_ISBLK(m)   ? "a device"
         : S_ISSOCK(m)                ? "a socket"
                                      : "not a file";
}

/* Reads a YAML file whole (NUL-terminated, *len bytes; the caller frees it), after checking that
 * it is a regular file of at most YAML_MAX_BYTES whose flow nesting is bounded.  On failure
 * returns NULL with a message naming the file (and the line) in err, and *st RH_ERR_IO (cannot
 * read) or RH_ERR_INVALID (not a file for a scenario). */
static char *read_yaml(const char *path, size_t *len, char *err, size_t errlen, rh_status *st) {
  *st = RH_ERR_IO;
  FILE *f;
  struct stat fst;
  int opened = rh_open_regular(path, "rb", &f, &fst);
  if (opened < 0) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  if (opened > 0) {
    *st = RH_ERR_INVALID;
    snprintf(err, errlen, "%s: is %s, not a %s file", path, rh_not_regular(&fst),
             S_ISDIR(fst.st_mode) ? "YAML" : "regular");
    return NULL;
  }
  char *text = NULL;
  if (fst.st_size > YAML_MAX_BYTES) {
    *st = RH_ERR_INVALID;
    snprintf(err, errlen, "%s: the file has %lld bytes; a scenario or preset has at most %d (4 MiB)",
             path, (long long)fst.st_size, YAML_MAX_BYTES);
  } else if (!(text = malloc((size_t)fst.st_size + 1))) {
    snprintf(err, errlen, "%s: out of memory", path);
  } else {
    *len = fread(text, 1, (size_t)fst.st_size, f);
    text[*len] = 0;
    int deep = 0;
    if (ferror(f)) {
      snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    } else if ((deep = too_deep(text, *len))) {
      *st = RH_ERR_INVALID;
      snprintf(err, errlen, "%s:%d: YAML: more than %d levels of [ ] and { } nesting", path, deep,
               YAML_MAX_FLOW_DEPTH);
    } else {
      fclose(f);
      *st = RH_OK;
      return text;
    }
    free(text);
    text = NULL;
  }
  fclose(f);
  return NULL;
}

static void walk_map(walker *w, const yaml_node_t *owner, const yaml_node_t *map,
                     const field *fields, const char *prefix);
static void walk_preset(walker *w, const yaml_node_t *n, const field *kids, const char *prefix,
                        const char *name, const char *kind);

static char *dup_str(walker *w, const char *s) {
  char *d = strdup(s);
  if (!d && !w->failed) {
    w->failed = true;
    snprintf(w->err, w->errlen, "%s: out of memory", w->path);
  }
  return d;
}


/* Stores the raw form for check_whole(): [1, n] for one number, [-count, n0, n1, ...] for a list. */
static void walk_slots(walker *w, const yaml_node_t *n, const field *f, const char *name) {
  rh_cluster *cl = &w->sc->cluster;
  free(cl->gpus_per_node);
  cl->gpus_per_node = NULL;
  if (n->type != YAML_SEQUENCE_NODE) {
    double v;
    if (!number_value(w, n, f, name, &v)) return;
    cl->gpus_per_node = calloc(2, sizeof(int));
    cl->gpus_per_node[0] = 1;
    cl->gpus_per_node[1] = (int)v;
    return;
  }
  int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count < 1) {
    fail(w, n, name, "the list of GPUs per node is empty");
    return;
  }
  cl->gpus_per_node = calloc((size_t)count + 1, sizeof(int));
  cl->gpus_per_node[0] = -count;
  for (int i = 0; i < count && !w->failed; i++) {
    yaml_node_t *item = yaml_document_get_node(w->doc, n->data.sequence.items.start[i]);
    char item_name[192];
    snprintf(item_name, sizeof item_name, "%s[%d]", name, i);
    double v;
    if (number_value(w, item, f, item_name, &v)) cl->gpus_per_node[i + 1] = (int)v;
  }
}

static void walk_layers(walker *w, const yaml_node_t *n, const char *name) {
  if (n->type == YAML_SCALAR_NODE) { /* a transformer's number of blocks */
    static const field bfield = {"layers", T_INT, false, 1, 10000, false, 1, 0, NULL, NULL, 0,
                                 "a transformer's blocks"};
    double v;
    if (number_value(w, n, &bfield, name, &v)) w->sc->model.tf.layers = (int)v;
    return;
  }
  if (n->type != YAML_SEQUENCE_NODE) {
    fail(w, n, name, "expected a list of layers (or a transformer's number of blocks), got %s",
         type_word(n));
    return;
  }
  for (int i = 0; i < w->sc->model.nlayers; i++) free(w->sc->model.layers[i].name);
  free(w->sc->model.layers); /* a preset's list, replaced */
  w->sc->model.layers = NULL;
  w->sc->model.nlayers = 0;
  int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (count < 1) {
    fail(w, n, name, "the list of layers is empty");
    return;
  }
  rh_scenario *sc = w->sc;
  sc->model.layers = calloc((size_t)count, sizeof(rh_layer));
  sc->model.nlayers = count;
  static const field pfield = {"parameters", T_COUNT, true, 0, 1e15, false, 1, 0, NULL, NULL, 0,
                               "a layer's parameters (0: a layer without its own, a tied head)"};
  for (int i = 0; i < count && !w->failed; i++) {
    yaml_node_t *item = yaml_document_get_node(w->doc, n->data.sequence.items.start[i]);
    char item_name[192];
    snprintf(item_name, sizeof item_name, "%s[%d]", name, i);
    if (item->type != YAML_MAPPING_NODE) {
      fail(w, item, item_name, "expected a mapping with name and parameters, got %s",
           type_word(item));
      return;
    }
    const yaml_node_t *pnode = NULL, *nnode = NULL;
    w->key = NULL;
    for (yaml_node_pair_t *p = item->data.mapping.pairs.start; p < item->data.mapping.pairs.top;
         p++) {
      yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
      yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
      const char *key = k->type == YAML_SCALAR_NODE ? scalar(k) : "?";
      char sub[256];
      snprintf(sub, sizeof sub, "%s.%s", item_name, key);
      bool is_name = strcmp(key, "name") == 0, is_params = strcmp(key, "parameters") == 0;
      bool is_flops = strcmp(key, "forward_gflops_per_sample") == 0;
      if (strcmp(key, "memory_MB_per_sample") == 0) {
        static const field mfield = {"memory_MB_per_sample", T_NUM, false, 0, 1e12, false, 1e6,
                                     0, NULL, NULL, 0, "a layer's activation bytes"};
        w->key = k;
        double v1;
        if (number_value(w, v, &mfield, sub, &v1)) sc->model.layers[i].memory_bytes = v1 * 1e6;
        continue;
      }
      bool is_traffic = strcmp(key, "traffic_per_sample") == 0;
      if (is_traffic || strcmp(key, "activations_per_sample") == 0) {
        static const field vfield = {"values", T_COUNT, false, 0, 1e15, false, 1, 0, NULL, NULL, 0,
                                     "a layer's values per sample"};
        w->key = k;
        double v1;
        if (number_value(w, v, &vfield, sub, &v1)) {
          if (is_traffic) sc->model.layers[i].traffic = v1;
          else sc->model.layers[i].activations = v1;
        }
        continue;
      }
      if (is_flops) {
        static const field ffield = {"forward_gflops_per_sample", T_NUM, false, 0, 1e12, false, 1e9,
                                     0, NULL, NULL, 0, "a layer's forward FLOPs"};
        w->key = k;
        double v1;
        if (number_value(w, v, &ffield, sub, &v1)) {
          sc->model.layers[i].forward_flops = v1 * 1e9;
          sc->model.layers[i].flops_given = true;
        }
        continue;
      }
      if ((is_name && nnode) || (is_params && pnode)) {
        fail(w, k, sub, "appears twice");
      } else if (is_name) {
        nnode = v;
        if (v->type != YAML_SCALAR_NODE || !*scalar(v)) {
          w->key = k;
          fail(w, v, sub, "expected a non-empty string, got %s",
               v->type == YAML_SCALAR_NODE ? "\"\"" : type_word(v));
        } else {
          sc->model.layers[i].name = dup_str(w, scalar(v));
        }
      } else if (is_params) {
        pnode = v;
        w->key = k;
        number_value(w, v, &pfield, sub, &sc->model.layers[i].parameters);
      } else {
        fail(w, k, sub, "unknown key (expected name, parameters, forward_gflops_per_sample, "
             "memory_MB_per_sample, traffic_per_sample, activations_per_sample)");
      }
    }
    if (!nnode && !w->failed) {
      char deflt[32];
      snprintf(deflt, sizeof deflt, "layer%d", i);
      sc->model.layers[i].name = dup_str(w, deflt);
    }
    w->key = NULL;
    if (!pnode) fail(w, item, item_name, "missing field 'parameters'");
  }
}

/* A list of mappings (failure events, discovery changes): each item walked against f->kids
 * with the walker's base moved to the item. */
/* One cause of the replay at scale: one way to its rate, and a reach its scope allows (checked
 * where it is written, its preset's file or the scenario). */
static void check_cause(walker *w, const yaml_node_t *item, const char *name, rh_scenario_cause *c) {
  int ways = (c->count >= 0) + (c->mtbf_hours >= 0) + (c->at_hours >= 0);
  if (ways != 1)
    fail(w, item, name, "give one of count (with failures.exposure), mtbf_hours or at_hours%s",
         ways ? ", not several" : "");
  if (c->takes_out < 0) /* a GPU's or a node's failure takes it out; the others the job */
    c->takes_out = c->per == RH_PER_GPU ? RH_OUT_GPU : c->per == RH_PER_NODE ? RH_OUT_NODE : RH_OUT_JOB;
  if (c->per == RH_PER_JOB && c->takes_out == RH_OUT_GPU)
    fail(w, item, name, "takes_out: gpu needs a rate per gpu (per: gpu), not per job");
  if (c->detection == RH_DETECT_PLANNED && (c->detect_s >= 0 || c->diagnosis_s >= 0))
    fail(w, item, name, "a planned stop is neither detected nor diagnosed: no %s",
         c->detect_s >= 0 ? "detect_s" : "diagnosis_s");
}

static void walk_items(walker *w, const yaml_node_t *n, const field *f, const char *name) {
  if (n->type != YAML_SEQUENCE_NODE) {
    fail(w, n, name, "expected a list of mappings, got %s", type_word(n));
    return;
  }
  int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
  rh_scenario *sc = w->sc;
  bool events = f->setting == ITEMS_EVENTS, causes = f->setting == ITEMS_CAUSES;
  size_t size = events ? sizeof(rh_scenario_fault)
                : causes ? sizeof(rh_scenario_cause) : sizeof(rh_scenario_change);
  char *items = calloc((size_t)(count ? count : 1), size);
  if (!items) {
    fail(w, n, name, "out of memory");
    return;
  }
  if (events) {
    free(sc->failures.events);
    sc->failures.events = (rh_scenario_fault *)items;
    sc->failures.nevents = count;
  } else if (causes) { /* a scenario's list replaces its preset's */
    for (int i = 0; i < sc->failures.ncauses; i++) free(sc->failures.causes[i].name);
    free(sc->failures.causes);
    sc->failures.causes = (rh_scenario_cause *)items;
    sc->failures.ncauses = count;
  } else {
    free(sc->elastic.changes);
    sc->elastic.changes = (rh_scenario_change *)items;
    sc->elastic.nchanges = count;
  }
  const yaml_node_t *key = w->key;
  for (int i = 0; i < count && !w->failed; i++) {
    yaml_node_t *item = yaml_document_get_node(w->doc, n->data.sequence.items.start[i]);
    char item_name[192];
    snprintf(item_name, sizeof item_name, "%s[%d]", name, i);
    if (item->type != YAML_MAPPING_NODE) {
      fail(w, item, item_name, "expected a mapping, got %s", type_word(item));
      return;
    }
    char *it = items + (size_t)i * size;
    if (events)
      *(rh_scenario_fault *)it = (rh_scenario_fault){.node = -1, .gpu = -1, .link = -1,
                                                       .at_s = -1, .during = -1,
                                                       .duration_s = -1, .factor = -1,
                                                       .line = line_of(item)};
    else if (causes)
      *(rh_scenario_cause *)it = (rh_scenario_cause){.count = -1, .mtbf_hours = -1,
                                                       .takes_out = -1, .at_hours = -1,
                                                       .detect_s = -1, .diagnosis_s = -1,
                                                       .line = line_of(item)};
    else
      *(rh_scenario_change *)it = (rh_scenario_change){.add = -1, .remove = -1,
                                                         .line = line_of(item)};
    w->base = it;
    w->key = NULL;
    walk_map(w, item, item, f->kids, item_name);
    w->base = (char *)sc;
    if (causes) check_cause(w, item, item_name, (rh_scenario_cause *)it);
  }
  w->key = key;
}

/* The keys an axis sets: itself, or the two of `gpus`. */
static int sweep_axis_sets(const char *axis, const char *keys[2]) {
  if (strcmp(axis, "gpus") != 0) {
    keys[0] = axis;
    return 1;
  }
  keys[0] = "cluster.nodes";
  keys[1] = "cluster.gpus_per_node";
  return 2;
}

const char *rh_sweep_axes_clash(const char *a, const char *b) {
  const char *ka[2], *kb[2];
  int na = sweep_axis_sets(a, ka), nb = sweep_axis_sets(b, kb);
  for (int i = 0; i < na; i++)
    for (int j = 0; j < nb; j++) {
      size_t la = strlen(ka[i]), lb = strlen(kb[j]), n = la < lb ? la : lb;
      const char *longer = la < lb ? kb[j] : ka[i];
      if (strncmp(ka[i], kb[j], n) == 0 && (longer[n] == 0 || longer[n] == '.'))
        return longer;
    }
  return NULL;
}

/* sweep: each key a dotted scenario path, each value a list of values (or one); kept as text,
 * for `rehearsal sweep` to set one point at a time.  A key twice, or two axes that set the same
 * key, are refused: the points would record values that were not what ran. */
static void walk_sweep(walker *w, const yaml_node_t *n, const char *name) {
  if (n->type != YAML_MAPPING_NODE) {
    fail(w, n, name, "expected a mapping of scenario keys to lists of values, got %s", type_word(n));
    return;
  }
  rh_scenario *sc = w->sc;
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top && !w->failed; p++) {
    yaml_node_t *k = yaml_document_get_node(w->doc, p->key), *v = yaml_document_get_node(w->doc, p->value);
    if (k->type != YAML_SCALAR_NODE || strchr(scalar(k), '=') ||
        (!strchr(scalar(k), '.') && strcmp(scalar(k), "gpus") != 0)) {
      fail(w, k, name, "a key is a dotted scenario path such as cluster.nodes, or gpus");
      return;
    }
    char where[200];
    snprintf(where, sizeof where, "%s.%s", name, scalar(k));
    for (int i = 0; i < sc->sweep.naxes; i++) {
      const rh_sweep_axis *other = &sc->sweep.axes[i];
      const char *both = rh_sweep_axes_clash(other->key, scalar(k));
      if (both && strcmp(other->key, scalar(k)) == 0) fail(w, k, where, "appears twice");
      else if (both)
        fail(w, k, where, "sets %s, as the axis %s (line %d) does", both, other->key, other->line);
      if (both) return;
    }
    int count = v->type == YAML_SEQUENCE_NODE ? (int)(v->data.sequence.items.top - v->data.sequence.items.start) : 1;
    if (v->type == YAML_MAPPING_NODE || count < 1) {
      fail(w, v, where, "expected a list of values");
      return;
    }
    rh_sweep_axis *axes = realloc(sc->sweep.axes, (size_t)(sc->sweep.naxes + 1) * sizeof *axes);
    if (!axes) {
      fail(w, v, where, "out of memory");
      return;
    }
    sc->sweep.axes = axes;
    rh_sweep_axis *a = &axes[sc->sweep.naxes++];
    *a = (rh_sweep_axis){.key = dup_str(w, scalar(k)), .values = calloc((size_t)count, sizeof(char *)),
                         .line = line_of(k)};
    for (int i = 0; i < count && !w->failed; i++) {
      yaml_node_t *item = v->type == YAML_SEQUENCE_NODE
                              ? yaml_document_get_node(w->doc, v->data.sequence.items.start[i]) : v;
      if (item->type != YAML_SCALAR_NODE) {
        fail(w, item, where, "each value is a scalar");
        return;
      }
      a->values[a->nvalues++] = dup_str(w, scalar(item));
    }
  }
}

static void walk_value(walker *w, const yaml_node_t *n, const field *f, const char *name) {
  char *base = w->base;
  switch (f->type) {
  case T_MAP:
    if (f->offset) *(bool *)(base + f->offset) = true; /* the section is there */
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (!*scalar(n) || strcmp(scalar(n), "~") == 0 || strcmp(scalar(n), "null") == 0)) {
      /* an empty section ("checks:" and nothing under it) is an empty mapping */
      static const yaml_node_t empty = {.type = YAML_MAPPING_NODE};
      yaml_node_t e = empty;
      e.start_mark = n->start_mark;
      walk_map(w, w->key, &e, f->kids, name);
      return;
    }
    if (n->type != YAML_MAPPING_NODE) {
      fail(w, n, name, "expected a mapping, got %s", type_word(n));
      return;
    }
    walk_map(w, w->key, n, f->kids, name);
    return;
  case T_INT: {
    double v;
    if (number_value(w, n, f, name, &v)) *(int *)(base + f->offset) = (int)v;
    return;
  }
  case T_DURATION: {
    double v;
    if (duration_value(w, n, f, name, &v)) *(double *)(base + f->offset) = v;
    return;
  }
  case T_COUNT:
  case T_NUM: {
    double v;
    if (number_value(w, n, f, name, &v)) *(double *)(base + f->offset) = v * f->scale;
    /* a rate the scenario itself gives, not its preset's */
    if (w->depth == 0 && base == (char *)w->sc && f->offset == OFF(cluster.gpu_flops))
      w->sc->compute.tflops_written = true;
    if (base == (char *)w->sc && f->offset == OFF(recipe.base_lr)) w->sc->recipe.lr_written = true;
    return;
  }
  case T_STR:
    if (n->type != YAML_SCALAR_NODE || !*scalar(n)) {
      fail(w, n, name, "expected a non-empty string, got %s", n->type == YAML_SCALAR_NODE ? "\"\"" : type_word(n));
      return;
    }
    free(*(char **)(base + f->offset));
    *(char **)(base + f->offset) = dup_str(w, scalar(n));
    return;
  case T_ENUM: {
    if (n->type == YAML_SCALAR_NODE)
      for (int i = 0; f->choices[i]; i++)
        if (strcmp(f->choices[i], scalar(n)) == 0) {
          *(int *)(base + f->offset) = i;
          return;
        }
    char list[128] = "";
    for (int i = 0; f->choices[i]; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", f->choices[i]);
    fail(w, n, name, "expected one of %s, got %s%s%s", list,
         n->type == YAML_SCALAR_NODE ? "\"" : "", n->type == YAML_SCALAR_NODE ? scalar(n) : type_word(n),
         n->type == YAML_SCALAR_NODE ? "\"" : "");
    return;
  }
  case T_SLOTS: walk_slots(w, n, f, name); return;
  case T_NAMES: {
    char list[256] = "";
    for (int i = 0; f->choices[i]; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", f->choices[i]);
    if (n->type != YAML_SEQUENCE_NODE) {
      fail(w, n, name, "expected a list of names from: %s", list);
      return;
    }
    unsigned mask = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
      yaml_node_t *item = yaml_document_get_node(w->doc, *it);
      int k = -1;
      if (item->type == YAML_SCALAR_NODE)
        for (int i = 0; f->choices[i]; i++)
          if (strcmp(f->choices[i], scalar(item)) == 0) k = i;
      if (k < 0) {
        fail(w, item, name, "%s%s%s is not one of: %s", item->type == YAML_SCALAR_NODE ? "\"" : "",
             item->type == YAML_SCALAR_NODE ? scalar(item) : type_word(item),
             item->type == YAML_SCALAR_NODE ? "\"" : "", list);
        return;
      }
      mask |= 1u << k;
    }
    *(unsigned *)(base + f->offset) = mask;
    return;
  }
  case T_DECAY: {
    if (n->type != YAML_SEQUENCE_NODE) {
      fail(w, n, name, "expected a list of epochs, got %s", type_word(n));
      return;
    }
    int count = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    rh_scenario *sc = w->sc;
    free(sc->recipe.decay_epochs);
    sc->recipe.decay_epochs = calloc((size_t)(count ? count : 1), sizeof(double));
    sc->recipe.ndecay = count;
    for (int i = 0; i < count && !w->failed; i++) {
      yaml_node_t *item = yaml_document_get_node(w->doc, n->data.sequence.items.start[i]);
      char item_name[192];
      snprintf(item_name, sizeof item_name, "%s[%d]", name, i);
      static const field epoch_field = {"epoch", T_COUNT, true, 1, 1e6, false, 1, 0, NULL, NULL, 0,
                                        "a decay's epoch"};
      number_value(w, item, &epoch_field, item_name, &sc->recipe.decay_epochs[i]);
      if (!w->failed && i > 0 && sc->recipe.decay_epochs[i] <= sc->recipe.decay_epochs[i - 1])
        fail(w, item, item_name, "epochs must increase (%.17g after %.17g)",
             sc->recipe.decay_epochs[i], sc->recipe.decay_epochs[i - 1]);
    }
    return;
  }
  case T_LAYERS: walk_layers(w, n, name); return;
  case T_SWEEP: walk_sweep(w, n, name); return;
  case T_ITEMS: walk_items(w, n, f, name); return;
  case T_BOOL:
    if (n->type == YAML_SCALAR_NODE && (!strcmp(scalar(n), "true") || !strcmp(scalar(n), "false"))) {
      *(bool *)(base + f->offset) = !strcmp(scalar(n), "true");
      return;
    }
    fail(w, n, name, "expected true or false, got %s%s%s", n->type == YAML_SCALAR_NODE ? "\"" : "",
         n->type == YAML_SCALAR_NODE ? scalar(n) : type_word(n), n->type == YAML_SCALAR_NODE ? "\"" : "");
    return;
  case T_PRESET: {
    /* `node:` and `preset:` fill the mapping they are in; `gpu:` and `network:` their own */
    bool fills_parent = !strcmp(f->key, "node") || !strcmp(f->key, "preset");
    const field *kids = f->setting == PRESET_NODE    ? cluster_fields
                        : f->setting == PRESET_GPU   ? gpu_fields
                        : f->setting == PRESET_FRAMEWORK ? framework_fields
                        : f->setting == PRESET_FAILURES ? failure_fields
                        : f->setting == PRESET_MODEL ? model_fields
                                                     : network_fields;
    if (n->type == YAML_MAPPING_NODE && !fills_parent) {
      walk_map(w, w->key, n, kids, name);
      return;
    }
    bool empty = n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
                 (!*scalar(n) || !strcmp(scalar(n), "~") || !strcmp(scalar(n), "null"));
    if (n->type != YAML_SCALAR_NODE || !*scalar(n) || empty) {
      fail(w, n, name, "expected the name of a %s preset%s, got %s", rh__preset_kinds[f->setting],
           fills_parent ? "" : " or a mapping", empty || !*scalar(n) ? "nothing" : type_word(n));
      return;
    }
    char prefix[160];
    snprintf(prefix, sizeof prefix, "%s", name);
    if (fills_parent) {
      char *dot = strrchr(prefix, '.');
      if (dot) *dot = 0;
    }
    walk_preset(w, n, kids, prefix, name, rh__preset_kinds[f->setting]);
    return;
  }
  case T_SETTING: {
    const rh_setting_def *d = &rh__setting_defs[f->setting];
    double v;
    if (n->type != YAML_SCALAR_NODE || rh_settings_parse((rh_setting_id)f->setting, scalar(n), &v)) {
      char want[160];
      if (d->kind == RH_KIND_ENUM) {
        snprintf(want, sizeof want, "one of");
        for (int i = 0; d->choices[i]; i++)
          snprintf(want + strlen(want), sizeof want - strlen(want), "%s %s", i ? "," : "",
                   d->choices[i]);
      } else {
        snprintf(want, sizeof want, "a %s %s up to %.15g %s", d->zero_ok ? "non-negative" : "positive",
                 d->kind == RH_KIND_BYTES ? "whole size in bytes (units B, KiB, MiB, GiB, KB, MB, GB)"
                                          : "duration in seconds (units s, ms, us)",
                 d->max, d->kind == RH_KIND_BYTES ? "B" : "s");
      }
      fail(w, n, name, "expected %s, got %s%s%s", want, n->type == YAML_SCALAR_NODE ? "\"" : "",
           n->type == YAML_SCALAR_NODE ? scalar(n) : type_word(n),
           n->type == YAML_SCALAR_NODE ? "\"" : "");
      return;
    }
    rh_settings *st = &w->sc->settings;
    if (st->source[f->setting] == RH_SOURCE_ENVIRONMENT) /* said with the settings, not lost */
      st->overridden[f->setting] = st->variable[f->setting];
    w->sc->settings.value[f->setting] = v;
    w->sc->settings.source[f->setting] =
        n->start_mark.line >= SET_LINE ? RH_SOURCE_COMMAND_LINE : RH_SOURCE_SCENARIO;
    w->sc->settings.variable[f->setting] = NULL;
    return;
  }
  }
}

/* Walks a mapping against its fields; `owner` is the mapping's own key (NULL at the top), the line
 * reported for a missing field. */
static void walk_map(walker *w, const yaml_node_t *owner, const yaml_node_t *map,
                     const field *fields, const char *prefix) {
  size_t nf = 0;
  while (fields[nf].key) nf++;
  bool seen[48] = {false};
  /* two passes: presets named here first, so that the keys written beside them win */
  for (int pass = 0; pass < 2; pass++)
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
         p < map->data.mapping.pairs.top && !w->failed; p++) {
      yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
      yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
      char name[160];
      if (k->type != YAML_SCALAR_NODE) {
        w->key = NULL;
        fail(w, k, *prefix ? prefix : "scenario", "a key must be a plain word, not %s", type_word(k));
        return;
      }
      const char *key = scalar(k);
      snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", key);
      size_t i;
      for (i = 0; i < nf; i++)
        if (strcmp(fields[i].key, key) == 0) break;
      bool preset = i < nf && fields[i].type == T_PRESET && v->type == YAML_SCALAR_NODE;
      if (preset != (pass == 0)) continue;
      if (i == nf) {
        char list[512] = "";
        for (size_t j = 0; j < nf; j++)
          snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", fields[j].key);
        fail(w, k, name, "unknown key (expected one of: %s)", list);
        return;
      }
      if (seen[i]) {
        fail(w, k, name, "appears twice");
        return;
      }
      seen[i] = true;
      w->key = k;
      walk_value(w, v, &fields[i], name);
      if (w->depth > 0) note_provided(w, name, k);
    }
  /* a preset is a part: what it lacks, the scenario gives */
  for (size_t i = 0; i < nf && !w->failed && w->depth == 0; i++) {
    char name[160];
    snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", fields[i].key);
    bool optional = (w->cluster_only && !*prefix && strcmp(name, "name") != 0 &&
                     strcmp(name, "cluster") != 0) ||
                    (w->model_only && !*prefix && strcmp(name, "name") != 0 &&
                     strcmp(name, "model") != 0);
    if (fields[i].required && !seen[i] && !was_provided(w, name) && !optional) {
      w->key = NULL;
      fail(w, owner ? owner : map, name, "missing (required)");
    }
  }
}

/* The presets of a kind, for a message: "a, b, c" */
static void preset_list(const char *dir, char *buf, size_t len) {
  buf[0] = 0;
  DIR *d = opendir(dir);
  if (!d) return;
  char names[64][64];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < 64;) {
    size_t l = strlen(e->d_name);
    if (l > 5 && l < 64 && strcmp(e->d_name + l - 5, ".yaml") == 0) {
      memcpy(names[n], e->d_name, l - 5);
      names[n++][l - 5] = 0;
    }
  }
  closedir(d);
  qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
  for (int i = 0; i < n; i++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", i ? ", " : "", names[i]);
}

/* Walks the preset `n` names (presets/<kind>/NAME.yaml, or a path ending in .yaml relative to
 * the file that names it) against `kids` under `prefix`; its errors name the preset's file. */
/* A model preset written as a scenario's section, `model:` its one key (what
 * tools/torch_export.py writes by default), is read as the mapping under that key. */
static yaml_node_t *under_model_key(yaml_document_t *doc, yaml_node_t *top) {
  if (!top || top->type != YAML_MAPPING_NODE ||
      top->data.mapping.pairs.top - top->data.mapping.pairs.start != 1)
    return top;
  yaml_node_pair_t *pair = top->data.mapping.pairs.start;
  yaml_node_t *key = yaml_document_get_node(doc, pair->key);
  yaml_node_t *value = yaml_document_get_node(doc, pair->value);
  bool model = key && key->type == YAML_SCALAR_NODE && !strcmp((const char *)key->data.scalar.value, "model");
  return model && value && value->type == YAML_MAPPING_NODE ? value : top;
}

static void walk_preset(walker *w, const yaml_node_t *n, const field *kids, const char *prefix,
                        const char *name, const char *kind) {
  const char *want = scalar(n);
  char path[1024], dir[900];
  size_t wl = strlen(want);
  char root[800];
  snprintf(dir, sizeof dir, "%s/%s", rh_presets_root(root, sizeof root, NULL), kind);
  if (wl > 5 && strcmp(want + wl - 5, ".yaml") == 0) {
    const char *slash = strrchr(w->path, '/');
    if (want[0] == '/' || !slash) snprintf(path, sizeof path, "%s", want);
    else snprintf(path, sizeof path, "%.*s/%s", (int)(slash - w->path), w->path, want);
  } else if (strchr(want, '/') || strchr(want, '.')) {
    fail(w, n, name, "a preset is a name (as in presets/%s/NAME.yaml) or a path ending in .yaml, "
         "got \"%s\"", kind, want);
    return;
  } else {
    snprintf(path, sizeof path, "%s/%s.yaml", dir, want);
  }
  if (w->depth >= 4) {
    fail(w, n, name, "presets name presets more than 4 deep");
    return;
  }
  if (access(path, F_OK) != 0) {
    char list[512];
    int e = errno;
    preset_list(dir, list, sizeof list);
    fail(w, n, name, "no %s preset \"%s\" (%s: %s)%s%s", kind, want, path, strerror(e),
         *list ? "; there are: " : "", list);
    return;
  }
  char why[1200];
  size_t len = 0;
  rh_status st;
  char *text = read_yaml(path, &len, why, sizeof why, &st);
  if (!text) {
    fail(w, n, name, "the %s preset %s", kind, why);
    return;
  }
  yaml_parser_t parser;
  yaml_document_t doc;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &doc)) {
    fail(w, n, name, "in preset %s:%d: YAML syntax error: %s", path,
         (int)parser.problem_mark.line + 1, parser.problem ? parser.problem : "unreadable");
    yaml_parser_delete(&parser);
    free(text);
    return;
  }
  /* the preset's own error, then said where the scenario names the preset */
  char inner[1024] = "";
  walker sub = *w;
  sub.doc = &doc;
  sub.path = path;
  sub.key = NULL;
  sub.err = inner;
  sub.errlen = sizeof inner;
  sub.depth = w->depth + 1;
  yaml_node_t *top = yaml_document_get_root_node(&doc);
  if (!strcmp(kind, "model")) top = under_model_key(&doc, top);
  if (!top || top->type != YAML_MAPPING_NODE)
    fail(&sub, top, prefix, "a preset is a mapping of %s keys", prefix);
  else
    walk_map(&sub, NULL, top, kids, prefix);
  if (sub.failed) fail(w, n, name, "in preset %s", inner);
  if (!w->failed) { /* one part per file: a second document is a mistake, not ignored */
    yaml_document_t more;
    if (yaml_parser_load(&parser, &more)) {
      yaml_node_t *r2 = yaml_document_get_root_node(&more);
      if (r2)
        fail(w, n, name, "in preset %s:%d: a second YAML document; a preset holds one", path,
             (int)r2->start_mark.line + 1);
      yaml_document_delete(&more);
    }
  }
  w->sc->presets_used++;
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  free(text);
}

/* ---- whole-scenario checks ---------------------------------------------------------------- */

/* Finds the key node of a dotted path (for the line of a cross-field error); the deepest key
 * found, or the root.  *exact: whether the whole path was found (may be NULL). */
static const yaml_node_t *key_at(yaml_document_t *doc, const char *path, bool *exact) {
  const yaml_node_t *n = yaml_document_get_root_node(doc), *at = n;
  char buf[160];
  snprintf(buf, sizeof buf, "%s", path);
  if (exact) *exact = false;
  for (char *tok = strtok(buf, "."); tok && n; tok = strtok(NULL, ".")) {
    if (n->type != YAML_MAPPING_NODE) return at;
    const yaml_node_t *next = NULL;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
      yaml_node_t *k = yaml_document_get_node(doc, p->key);
      if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), tok) == 0) {
        next = yaml_document_get_node(doc, p->value);
        at = k;
      }
    }
    if (!next) return at;
    n = next;
  }
  if (exact) *exact = true;
  return at;
}

static const yaml_node_t *node_at(yaml_document_t *doc, const char *path) {
  return key_at(doc, path, NULL);
}

/* The key node of `field` in item `index` of the list at `path` (or the item, or the list's key):
 * the line for an error about one item of a list. */
static const yaml_node_t *item_key(yaml_document_t *doc, const char *path, int index,
                                   const char *key_name) {
  const yaml_node_t *key = node_at(doc, path), *n = yaml_document_get_root_node(doc);
  char buf[160];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *tok = strtok(buf, "."); tok && n && n->type == YAML_MAPPING_NODE; tok = strtok(NULL, ".")) {
    const yaml_node_t *next = NULL;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
      yaml_node_t *k = yaml_document_get_node(doc, p->key);
      if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), tok) == 0)
        next = yaml_document_get_node(doc, p->value);
    }
    n = next;
  }
  if (!n || n->type != YAML_SEQUENCE_NODE || index >= n->data.sequence.items.top - n->data.sequence.items.start)
    return key;
  const yaml_node_t *item = yaml_document_get_node(doc, n->data.sequence.items.start[index]);
  if (item->type != YAML_MAPPING_NODE || !key_name) return item;
  for (yaml_node_pair_t *p = item->data.mapping.pairs.start; p < item->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), key_name) == 0) return k;
  }
  return item;
}

/* "nodes 0-3" or "nodes 0-3, spare nodes 4-5": what a node index may be. */
static void node_range(const rh_cluster *cl, char *buf, size_t len) {
  int n = cl->nodes, s = cl->spares;
  int k = snprintf(buf, len, n > 1 ? "nodes 0-%d" : "node 0", n - 1);
  if (s > 0 && k > 0 && (size_t)k < len)
    snprintf(buf + k, len - (size_t)k, s > 1 ? ", spare nodes %d-%d" : ", spare node %d", n, n + s - 1);
}

/* One failure event: a place that exists, the fields its kind needs, a trigger. */
static void check_event(walker *w, int i) {
  rh_scenario *sc = w->sc;
  const rh_cluster *cl = &sc->cluster;
  const rh_scenario_fault *e = &sc->failures.events[i];
  char name[96], range[96];
  const char *kind = rh_fault_names[e->kind];
  bool needs_gpu = e->kind == RH_FAULT_GPU_CRASH || e->kind == RH_FAULT_HANG;
  bool is_link = e->kind == RH_FAULT_LINK_DOWN || e->kind == RH_FAULT_LINK_DEGRADED;
  bool windowed = is_link || e->kind == RH_FAULT_STRAGGLER;
  bool has_factor = e->kind == RH_FAULT_LINK_DEGRADED || e->kind == RH_FAULT_STRAGGLER;
#define EFAIL(fld, ...)                                                                      \
  do {                                                                                         \
    snprintf(name, sizeof name, "failures.events[%d].%s", i, fld);                             \
    fail(w, item_key(w->doc, "failures.events", i, fld), name, __VA_ARGS__);                   \
    return;                                                                                    \
  } while (0)
  if (e->node < 0) EFAIL("node", "missing (required: the node the %s happens on)", kind);
  if (e->node >= cl->nodes + cl->spares) {
    node_range(cl, range, sizeof range);
    EFAIL("node", "node %d is not in the cluster (%s)", e->node, range);
  }
  int gpus = cl->gpus_per_node[e->node];
  if (e->gpu >= gpus) EFAIL("gpu", "node %d has %d GPU%s (0-%d)", e->node, gpus, gpus == 1 ? "" : "s", gpus - 1);
  if (needs_gpu && e->gpu < 0) EFAIL("gpu", "missing (required: which GPU of node %d the %s hits)", e->node, kind);
  if (e->kind == RH_FAULT_HOST_CRASH && e->gpu >= 0)
    EFAIL("gpu", "a host_crash takes the whole node; gpu_crash is one GPU's");
  if (is_link && e->link < 0) EFAIL("link", "missing (required for %s: uplink or gpu)", kind);
  if (!is_link && e->link >= 0) EFAIL("link", "only a link fault names a link, not a %s", kind);
  if (is_link && e->link == 1 && e->gpu < 0) EFAIL("gpu", "missing (required for a GPU's link)");
  if (is_link && e->link == 0 && cl->nodes + cl->spares < 2)
    EFAIL("link", "a one-node cluster has no uplink");
  if (is_link && e->link == 0 && e->gpu >= 0) EFAIL("gpu", "an uplink is the node's, not a GPU's");
  if (has_factor && e->factor < 0 && !(e->kind == RH_FAULT_LINK_DEGRADED && e->extra_latency_us > 0))
    EFAIL("factor", "missing (required for %s: the fraction of %s left, in (0, 1])", kind,
          e->kind == RH_FAULT_STRAGGLER ? "its speed" : "the bandwidth");
  /* a component a million times slower, or a second later on every message, is dead rather than
   * degraded: the job would hang on it (a host_crash, a hang or a link_down says that) */
  if (has_factor && e->factor >= 0 && e->factor < RH_FAULT_FACTOR_MIN)
    EFAIL("factor", "%g is a dead component, not a degraded one: expected from %g to 1 (a GPU "
          "that stopped is a hang, a link a link_down)", e->factor, RH_FAULT_FACTOR_MIN);
  if (e->extra_latency_us > RH_FAULT_EXTRA_LATENCY_MAX_US)
    EFAIL("extra_latency_us", "%g is a dead link, not a degraded one: expected from 0 to %g (a "
          "link that stopped is a link_down)", e->extra_latency_us, RH_FAULT_EXTRA_LATENCY_MAX_US);
  if (!has_factor && e->factor >= 0) EFAIL("factor", "a %s has no factor", kind);
  if (e->kind != RH_FAULT_LINK_DEGRADED && e->extra_latency_us > 0)
    EFAIL("extra_latency_us", "only a link_degraded adds latency");
  if (!windowed && e->duration_s >= 0) EFAIL("duration_s", "a %s lasts: only links and stragglers recover", kind);
  /* the trigger */
  if (e->at_s >= 0 && e->epoch > 0) EFAIL("epoch", "give at_s or epoch and step, not both");
  if (e->step > 0 && e->epoch <= 0) EFAIL("step", "a step needs its epoch");
  if (e->at_s < 0 && e->epoch <= 0 && e->during < 0)
    EFAIL("kind", "no trigger: give at_s, or epoch (and step), or during");
  int size = rh_scenario_size(sc);
  int epochs = rh_recipe_epochs((int)sc->recipe.epochs, sc->recipe.epochs_rule == 1, size);
  if (e->epoch > epochs) EFAIL("epoch", "epoch %.17g is after the last one (the job runs %d)", e->epoch, epochs);
  long steps = sc->data.train > 0 ? rh_scenario_steps_per_epoch(sc) : 0;
  if (e->step > 0 && steps > 0 && e->step > steps)
    EFAIL("step", "step %.17g is after the last step of an epoch (%ld on the starting %d GPUs)",
          e->step, steps, size);
#undef EFAIL
}

/* How long the job runs: epochs, or recipe.steps (the epochs they take at the starting size; a
 * world that shrinks has more steps an epoch), or recipe.duration (its epochs default to 1). */
static void check_length(walker *w) {
  rh_scenario *sc = w->sc;
  const char *both = sc->recipe.steps > 0 && sc->recipe.epochs > 0     ? "recipe.epochs"
                     : sc->recipe.steps > 0 && sc->recipe.stop_at_step > 0 ? "recipe.stop_at_step"
                     : sc->recipe.steps > 0 && sc->recipe.duration > 0     ? "recipe.duration"
                                                                           : NULL;
  if (both) {
    fail(w, node_at(w->doc, "recipe.steps"), "recipe.steps",
         "give recipe.steps or %s, not both: steps says how many global steps the job runs", both);
    return;
  }
  /* every rank stops at the step rank 0 finds past the duration: the simulator's ranks share
   * that step, real processes would not (the others would wait for rank 0 for ever) */
  if (sc->recipe.duration > 0 && w->real_target) {
    fail(w, node_at(w->doc, "recipe.duration"), "recipe.duration",
         "the simulator's clock says when a job's duration is up; on real processes give "
         "recipe.steps (or epochs)");
    return;
  }
  long per = sc->data.train > 0 ? rh_scenario_steps_per_epoch(sc) : 0;
  if (sc->recipe.steps > 0 && per < 1) {
    fail(w, node_at(w->doc, "recipe.steps"), "recipe.steps",
         "needs data.train_samples to cut its epochs");
    return;
  }
  if (sc->recipe.steps > 0) {
    sc->recipe.epochs = ceil(sc->recipe.steps / (double)per);
    sc->recipe.epochs_rule = 0; /* fixed: the steps are the job's, whatever its size */
  } else if (sc->recipe.duration > 0 && !(sc->recipe.epochs > 0)) {
    sc->recipe.epochs = 1;
  }
  if (!(sc->recipe.epochs > 0))
    fail(w, node_at(w->doc, "recipe"), "recipe.epochs",
         "missing (required: or recipe.steps, or recipe.duration)");
}

bool rh_scenario_cause_kept(const rh_scenario *sc, int i) {
  return !sc->failures.only_per || (sc->failures.only_per & (1u << sc->failures.causes[i].per));
}

/* The replay at scale: its causes, their counts' log, and the recovery it relaunches with. */
static void check_at_scale(walker *w) {
  rh_scenario *sc = w->sc;
  bool horizon = sc->failures.horizon_s > 0;
  if (!horizon && sc->failures.ncauses == 0) return;
  const char *at = horizon ? "failures.horizon_days" : "failures.causes";
  if (!horizon || sc->failures.ncauses == 0) {
    fail(w, node_at(w->doc, at), at, horizon ? "the replay at scale needs failures.causes "
         "(or a failures.preset)" : "the causes are replayed over failures.horizon_days: give it");
    return;
  }
  if (sc->elastic.present || (sc->restart.present && sc->restart.policy == 0)) {
    fail(w, node_at(w->doc, at), at, "the replay at scale relaunches a fixed-size job from its "
         "checkpoint: %s", sc->elastic.present ? "not with elastic" : "restart.policy is none");
    return;
  }
  int kept = 0;
  for (int i = 0; i < sc->failures.ncauses; i++) kept += rh_scenario_cause_kept(sc, i);
  bool given;
  const yaml_node_t *only = key_at(w->doc, "failures.only_per", &given);
  if (given && !sc->failures.only_per) /* an empty list */
    fail(w, only, "failures.only_per", "name the scopes kept (gpu, node, job); an empty list keeps "
         "no cause");
  else if (kept == 0)
    fail(w, node_at(w->doc, "failures.only_per"), "failures.only_per",
         "keeps none of the %d causes", sc->failures.ncauses);
  const double units[] = {sc->failures.exposure_gpus, sc->failures.exposure_nodes, 1};
  for (int i = 0; i < sc->failures.ncauses; i++) {
    const rh_scenario_cause *c = &sc->failures.causes[i];
    char name[64];
    snprintf(name, sizeof name, "failures.causes[%d]", i);
    const yaml_node_t *where = item_key(w->doc, "failures.causes", i, NULL); /* else a preset's */
    if (!where) where = node_at(w->doc, "failures");
    if (c->count >= 0 && (!(units[c->per] > 0) || !(sc->failures.exposure_hours > 0)))
      fail(w, where, name, "%s: a count needs failures.exposure.%s and "
           "failures.exposure.hours (the log it was counted in)", c->name,
           c->per == RH_PER_JOB ? "hours" : rh_cause_scope_names[c->per]);
    if (c->takes_out == RH_OUT_LINK && sc->cluster.nodes < 2)
      fail(w, where, name, "%s takes out a link, but the cluster's one "
           "node has no network link", c->name);
  }
  if (sc->restart.spare_nodes >= 0 && !(sc->restart.repair_s > 0))
    fail(w, node_at(w->doc, "restart.spare_nodes"), "restart.spare_nodes",
         "a failed node comes back into the spares after restart.repair_hours: give it");
}

/* The elastic and restart sections against the cluster they run on. */
static void check_elastic(walker *w) {
  rh_scenario *sc = w->sc;
  const rh_cluster *cl = &sc->cluster;
  int size = rh_scenario_size(sc);
  char name[96], range[96];
  if (sc->elastic.present && sc->restart.present) {
    fail(w, node_at(w->doc, "restart"), "restart",
         "an elastic job recovers by itself; restart is for a fixed-size job");
    return;
  }
  if (sc->elastic.min_np > size) {
    fail(w, node_at(w->doc, "elastic.min_np"), "elastic.min_np",
         "%d is more than the %d GPUs the job starts on", sc->elastic.min_np, size);
    return;
  }
  if (sc->elastic.max_np > 0 && sc->elastic.max_np < size) {
    fail(w, node_at(w->doc, "elastic.max_np"), "elastic.max_np",
         "%d is less than the %d GPUs the job starts on", sc->elastic.max_np, size);
    return;
  }
  if (sc->elastic.max_np > 0 && sc->elastic.min_np > sc->elastic.max_np) {
    fail(w, node_at(w->doc, "elastic.min_np"), "elastic.min_np", "%d is more than max_np %d",
         sc->elastic.min_np, sc->elastic.max_np);
    return;
  }
  for (int i = 0; i < sc->elastic.nchanges && !w->failed; i++) {
    const rh_scenario_change *c = &sc->elastic.changes[i];
    const char *fld = c->add >= 0 ? "add" : "remove";
    int node = c->add >= 0 ? c->add : c->remove;
    snprintf(name, sizeof name, "elastic.discovery[%d].%s", i, fld);
    if ((c->add >= 0) == (c->remove >= 0)) {
      snprintf(name, sizeof name, "elastic.discovery[%d]", i);
      fail(w, item_key(w->doc, "elastic.discovery", i, NULL), name,
           "give one of add or remove (a node)");
    } else if (node >= cl->nodes + cl->spares) {
      node_range(cl, range, sizeof range);
      fail(w, item_key(w->doc, "elastic.discovery", i, fld), name,
           "node %d is not in the cluster (%s)", node, range);
    } else if (i > 0 && c->at_s < sc->elastic.changes[i - 1].at_s) {
      snprintf(name, sizeof name, "elastic.discovery[%d].at_s", i);
      fail(w, item_key(w->doc, "elastic.discovery", i, "at_s"), name,
           "%.17g is before the change above it (%.17g): list changes in time order", c->at_s,
           sc->elastic.changes[i - 1].at_s);
    }
  }
}

/* Hybrid sharding's groups: nodes of the same GPUs, a shard group of whole nodes that divides
 * the job's GPUs (`key`: recipe.sharding's). */
static bool finish_shard_group(walker *w, int stage, const yaml_node_t *key) {
  rh_scenario *sc = w->sc;
  bool written;
  const yaml_node_t *at = key_at(w->doc, "recipe.shard_group_size", &written);
  if (written && sc->recipe.shard_group > 0 && stage != RH_SHARD_HYBRID) {
    fail(w, at, "recipe.shard_group_size", "applies to sharding: hybrid (recipe.sharding is %s)",
         rh_sharding_names[stage]);
    return false;
  }
  if (stage != RH_SHARD_HYBRID) return true;
  const rh_cluster *cl = &sc->cluster;
  bool uniform = cl->nodes > 0 && cl->gpus_per_node;
  for (int i = 1; uniform && i < cl->nodes; i++)
    uniform = cl->gpus_per_node[i] == cl->gpus_per_node[0];
  if (!uniform) {
    fail(w, key, "recipe.sharding", "hybrid shards inside groups of whole nodes and replicates "
         "across them: every node needs the same GPUs (cluster.gpus_per_node)");
    return false;
  }
  int L = cl->gpus_per_node[0], G = sc->recipe.shard_group, gpus = L * cl->nodes;
  if (G > 0 && (G % L != 0 || gpus % G != 0)) {
    fail(w, at, "recipe.shard_group_size", "%d %s: a shard group is whole nodes of %d GPUs that "
         "divide the job's %d", G, G % L ? "is not whole nodes" : "does not divide the job's GPUs",
         L, gpus);
    return false;
  }
  return true;
}

/* recipe.sharding: the state's stage, or the samples' older spelling (data.sharding's values);
 * hybrid sharding needs its groups (finish_shard_group). */
static bool finish_sharding(walker *w) {
  rh_scenario *sc = w->sc;
  bool written, samples_written;
  const yaml_node_t *key = key_at(w->doc, "recipe.sharding", &written);
  key_at(w->doc, "data.sharding", &samples_written);
  int k = sc->recipe.sharding_key;
  if (k < SAMPLES_AT) {
    sc->recipe.state_sharding = k;
  } else if (written) {
    if (samples_written) {
      fail(w, key, "recipe.sharding", "%s is the samples' sharding, given by data.sharding too: "
           "give it there alone (recipe.sharding is the state's: none, optimizer, gradients, "
           "hybrid or full)", sample_shardings[k - SAMPLES_AT]);
      return false;
    }
    sc->recipe.sharding = k - SAMPLES_AT;
  }
  if (sc->recipe.recompute != RH_RECOMPUTE_NONE &&
      !rh_recompute_has_blocks(sc->model.layers, sc->model.nlayers)) {
    fail(w, node_at(w->doc, "recipe.activation_checkpointing"), "recipe.activation_checkpointing",
         "the model has no transformer blocks to checkpoint (layers named blocks.N...: a family: "
         "transformer model)");
    return false;
  }
  int stage = sc->recipe.state_sharding;
  if (!sc->recipe.reduce_scatter && (stage == RH_SHARD_FULL || stage == RH_SHARD_HYBRID)) {
    fail(w, node_at(w->doc, "recipe.reduce_scatter"), "recipe.reduce_scatter",
         "false allreduces the whole gradients, which %s sharding does not keep: it applies to "
         "sharding: optimizer or gradients", rh_sharding_names[stage]);
    return false;
  }
  if (sc->recipe.checkpoint_format == 1 && stage == RH_SHARD_NONE) {
    fail(w, node_at(w->doc, "recipe.checkpoint_format"), "recipe.checkpoint_format",
         "sharded checkpoints are the shards of a sharded state: give recipe.sharding optimizer, "
         "gradients, hybrid or full (%s's step keeps the whole state on every rank)",
         rh_sharding_names[stage]);
    return false;
  }
  return finish_shard_group(w, stage, key);
}

/* The fabric's keys: placement applies to leaves, a leaf holds no more nodes than the cluster
 * has, and rails are a node's NICs, one per GPU. */
static void finish_fabric(walker *w) {
  const rh_cluster *cl = &w->sc->cluster;
  const rh_fabric *f = &cl->fabric;
  int nodes = cl->nodes + cl->spares;
  bool placed, leafed;
  const yaml_node_t *placement = key_at(w->doc, "cluster.network.placement", &placed);
  const yaml_node_t *leaf = key_at(w->doc, "cluster.network.nodes_per_leaf", &leafed);
  const yaml_node_t *topology = node_at(w->doc, "cluster.network.topology");
  if (w->failed) return;
  if (f->topology == RH_TOPO_SWITCH) {
    if (placed && f->placement != RH_PLACE_PACKED)
      fail(w, placement, "cluster.network.placement", "places nodes on leaves: topology is switch "
           "(fat_tree and rail have leaves)");
    return;
  }
  const char *name = topologies[f->topology];
  if (f->nodes_per_leaf < 1)
    fail(w, leafed ? leaf : topology, "cluster.network.nodes_per_leaf", "%s: %s puts the nodes "
         "under leaves of nodes_per_leaf nodes (at least 1)", leafed ? "is 0" : "missing", name);
  else if (f->nodes_per_leaf > nodes)
    fail(w, leafed ? leaf : topology, "cluster.network.nodes_per_leaf", "a leaf of %d nodes is "
         "larger than the cluster (%d node%s%s)", f->nodes_per_leaf, nodes, nodes == 1 ? "" : "s",
         cl->spares ? ", spares included" : "");
  if (w->failed || f->topology != RH_TOPO_RAIL) return;
  for (int n = 0; n < nodes; n++)
    if (cl->gpus_per_node[n] != cl->nics_per_node) {
      bool nics;
      const yaml_node_t *at = key_at(w->doc, "cluster.network.nics_per_node", &nics);
      fail(w, nics ? at : topology, "cluster.network.nics_per_node", "rail puts NIC k of each "
           "node on rail k's leaf, one NIC per GPU: node %d has %d GPU%s and %d NIC%s", n,
           cl->gpus_per_node[n], cl->gpus_per_node[n] == 1 ? "" : "s", cl->nics_per_node,
           cl->nics_per_node == 1 ? "" : "s");
      return;
    }
}

/* FSDP's wrap policy: its keys apply to full and hybrid sharding, min_num_params to the size
 * policy, and the policy must find units in the model's layers where it was asked for. */
static bool finish_wrap(walker *w) {
  rh_scenario *sc = w->sc;
  bool policy_written, min_written;
  const yaml_node_t *policy = key_at(w->doc, "recipe.wrap_policy", &policy_written);
  const yaml_node_t *min = key_at(w->doc, "recipe.min_num_params", &min_written);
  int stage = sc->recipe.state_sharding;
  const char *which = min_written ? "recipe.min_num_params" : "recipe.wrap_policy";
  if ((policy_written || min_written) && stage != RH_SHARD_FULL && stage != RH_SHARD_HYBRID) {
    fail(w, min_written ? min : policy, which, "FSDP's units are full and hybrid sharding's: "
         "recipe.sharding is %s", rh_sharding_names[stage]);
    return false;
  }
  if (min_written && sc->recipe.wrap_policy != 1) {
    fail(w, min, "recipe.min_num_params", "applies to wrap_policy: size (the transformer policy "
         "wraps each block, whatever its size)");
    return false;
  }
  if (!policy_written) return true;
  double largest = 0, root = 0;
  int units = rh_memory_units(sc->model.layers, sc->model.nlayers, rh_scenario_wrap_params(sc),
                              &largest, &root);
  if (units != 0) return true;
  if (sc->recipe.wrap_policy == 0)
    fail(w, policy, "recipe.wrap_policy", "transformer wraps each transformer block, and the "
         "model has none (layers named blocks.N...: a family: transformer model): %s sharding "
         "would gather the whole model as one unit", rh_sharding_names[stage]);
  else
    fail(w, policy, "recipe.wrap_policy", "size wraps no module of the model: none holds "
         "min_num_params (%.4g) parameters that a deeper unit did not take%s, so %s sharding "
         "would gather the whole model as one unit", sc->recipe.min_num_params,
         sc->model.nlayers ? "" : " (the model gives no layers)", rh_sharding_names[stage]);
  return false;
}

/* A timing model's layers: a family's built (model.c), a list's sums checked.  An error about a
 * key a preset gave names the preset's file and line; one where a preset's key conflicts with a
 * key written in the scenario or on the command line is said at the latter, naming both. */
static bool finish_model(walker *w) {
  rh_scenario *sc = w->sc;
  if (sc->model.kind != 0) return true;
  const char *at = NULL, *other = NULL, *why = rh__scenario_model_finish(sc, &at, &other);
  if (!why) return true;
  bool here = false, other_here = false;
  const yaml_node_t *k = key_at(w->doc, at, &here);
  const yaml_node_t *ko = other ? key_at(w->doc, other, &other_here) : NULL;
  int line = 0;
  const char *preset = here ? NULL : provided_at(w, at, &line);
  if (preset && other_here)
    fail(w, ko, other, "conflicts with %s, which the preset %s:%d gives: %s %s", at, preset, line,
         at, why);
  else if (preset)
    fail(w, k, at, "in preset %s:%d: %s", preset, line, why);
  else
    fail(w, k, at, "%s", why);
  return false;
}

static bool check_model_layers(walker *w) {
  rh_scenario *sc = w->sc;
  bool real = sc->model.kind != 0;
  if (real && (sc->model.nlayers > 0 || sc->model.parameters > 0 || sc->model.family)) {
    const char *at = sc->model.family ? "model.family"
                     : sc->model.nlayers ? "model.layers" : "model.parameters";
    fail(w, node_at(w->doc, at), at, "a real model (kind %s) has its own layers; give %s instead",
         model_kinds[sc->model.kind], sc->model.kind == RH_KIND_NET ? "network" : "hidden");
    return false;
  }
  if (!real && sc->model.nlayers == 0) {
    if (sc->model.parameters <= 0) {
      fail(w, node_at(w->doc, "model"), "model.parameters",
           "missing: give the parameter count or a list of layers");
      return false;
    }
    sc->model.layers = calloc(1, sizeof(rh_layer));
    sc->model.layers[0].name = strdup("all");
    sc->model.layers[0].parameters = sc->model.parameters;
    sc->model.nlayers = 1;
  } else if (!real) {
    double sum = 0, flops = 0;
    int with_flops = 0;
    for (int i = 0; i < sc->model.nlayers; i++) {
      sum += sc->model.layers[i].parameters;
      flops += sc->model.layers[i].forward_flops;
      with_flops += sc->model.layers[i].flops_given;
    }
    if (with_flops > 0 && with_flops < sc->model.nlayers) {
      fail(w, node_at(w->doc, "model.layers"), "model.layers",
           "%d of %d layers give forward_gflops_per_sample: give it for all or none", with_flops,
           sc->model.nlayers);
      return false;
    }
    if (sum <= 0) {
      fail(w, node_at(w->doc, "model.layers"), "model.layers", "no layer has parameters");
      return false;
    }
    if (with_flops > 0 && !(flops > 0)) {
      fail(w, node_at(w->doc, "model.layers"), "model.layers", "no layer has FLOPs");
      return false;
    }
    if (with_flops > 0) sc->model.forward_flops = flops; /* the model's is the layers' sum */
    if (sc->model.parameters > 0 && sum != sc->model.parameters && !sc->model.family)
      fail(w, node_at(w->doc, "model.parameters"), "model.parameters",
           "%.17g does not equal the sum of the layers' parameters (%.17g)", sc->model.parameters,
           sum);
    sc->model.parameters = sum;
  }
  return !w->failed;
}

/* " (environment variable NCCL_ALGO)" when the environment gave the setting, for a message that
 * would otherwise point at a scenario key the file does not have; else "". */
static const char *from_variable(const rh_scenario *sc, rh_setting_id id) {
  static char text[96];
  if (sc->settings.source[id] != RH_SOURCE_ENVIRONMENT || !sc->settings.variable[id]) return "";
  snprintf(text, sizeof text, " (environment variable %s)", sc->settings.variable[id]);
  return text;
}

/* IDX labels checked before anything runs, each error at its own field: the label files against
 * their images' count and, where the scenario gives data.classes, every label below it (absent,
 * the labels give the classes: data.classes becomes 0).  CIFAR-10 has its 10. */
static bool check_data_files(walker *w) {
  rh_scenario *sc = w->sc;
  bool given = false;
  key_at(w->doc, "data.classes", &given);
  if (sc->data.source == RH_DATA_CIFAR10 && given && sc->data.classes != 10) {
    fail(w, node_at(w->doc, "data.classes"), "data.classes", "CIFAR-10 has 10 classes, not %d",
         sc->data.classes);
    return false;
  }
  if (!given) sc->data.classes = 0;
  if (sc->data.source != RH_DATA_IDX) return true;
  static const char *const fields[2][2] = {{"data.train_images", "data.train_labels"},
                                           {"data.validation_images", "data.validation_labels"}};
  const char *files[2][2] = {{sc->data.train_images, sc->data.train_labels},
                             {sc->data.validation_images, sc->data.validation_labels}};
  const char *slash = strrchr(w->path, '/');
  for (int i = 0; i < 2 && files[i][0]; i++) {
    char path[2][1100], err[1400];
    for (int k = 0; k < 2; k++) /* relative to the scenario file, as the run reads them */
      if (files[i][k][0] == '/' || !slash) snprintf(path[k], sizeof path[k], "%s", files[i][k]);
      else snprintf(path[k], sizeof path[k], "%.*s/%s", (int)(slash - w->path), w->path, files[i][k]);
    int which;
    if (rh_idx_check_labels(path[0], path[1], sc->data.classes, &which, err, sizeof err) != RH_OK) {
      fail(w, node_at(w->doc, fields[i][which]), fields[i][which], "%s", err);
      return false;
    }
  }
  return true;
}

static void check_whole(walker *w) {
  rh_scenario *sc = w->sc;
  if (w->model_only) { /* `rehearsal model`: the model alone */
    if (finish_model(w)) check_model_layers(w);
    return;
  }
  rh_cluster *cl = &sc->cluster;
  /* gpus_per_node: expand one number to every node; a list must have one entry per node */
  int *given = cl->gpus_per_node;
  int *slots = calloc((size_t)(cl->nodes + cl->spares), sizeof(int));
  if (!slots) {
    fail(w, NULL, "cluster", "out of memory");
    return;
  }
  if (given[0] > 0) {
    for (int i = 0; i < cl->nodes; i++) slots[i] = given[1];
  } else if (-given[0] != cl->nodes) {
    fail(w, node_at(w->doc, "cluster.gpus_per_node"), "cluster.gpus_per_node",
         "has %d entr%s but cluster.nodes is %d", -given[0], -given[0] == 1 ? "y" : "ies",
         cl->nodes);
  } else {
    memcpy(slots, given + 1, (size_t)cl->nodes * sizeof(int));
  }
  for (int i = cl->nodes; i < cl->nodes + cl->spares; i++) slots[i] = slots[cl->nodes - 1];
  free(given);
  cl->gpus_per_node = slots;
  long gpus = rh_cluster_first_slot(cl, cl->nodes + cl->spares); /* spares included */
  if (gpus > RH_SCENARIO_MAX_GPUS) {
    double seconds, mib;
    rh_scenario_cost(gpus, &seconds, &mib);
    fail(w, node_at(w->doc, "cluster.nodes"), "cluster.nodes",
         "the cluster has %ld GPUs (spares included); at most %d are simulated (131,072 took "
         "128 s and 5.8 GiB for 10 steps on 2 cores, and the time grows faster than the GPUs: "
         "these would take about %.0f MiB and %.0f s)", gpus, RH_SCENARIO_MAX_GPUS,
         mib, seconds);
  }
  finish_fabric(w);
  check_at_scale(w);
  if (sc->network_model < 0) sc->network_model = sc->presets_used ? RH_NET_NCCL : RH_NET_EXACT;
  cl->net_model = (rh_net_model)sc->network_model;
  cl->exact_network = sc->network_model != RH_NET_REALISTIC;
  cl->fabric.tcp = sc->transport == 2;
  if (cl->fabric.nic_efficiency <= 0) /* the transport's achievable share of line rate */
    cl->fabric.nic_efficiency = sc->transport == 2 ? 0.65 : 0.96;
  cl->storage_write_bw = sc->storage.write_bw;
  cl->storage_read_bw = sc->storage.read_bw;
  cl->storage_latency = sc->storage.latency;
  if (w->failed) return;
  w->key = NULL;
  if (sc->compute.peak > 0 && sc->compute.peak < 1e9) {
    fail(w, node_at(w->doc, "cluster.gpu.peak_tflops"), "cluster.gpu.peak_tflops",
         "%g is below any GPU's (0: no roofline)", sc->compute.peak / 1e12);
    return;
  }
  if (sc->settings.value[RH_SETTING_CYCLE_TIME] > 10) {
    fail(w, node_at(w->doc, "collective.cycle_time"), "collective.cycle_time",
         "%g s%s: Horovod's cycle is milliseconds (at most 10 s)",
         sc->settings.value[RH_SETTING_CYCLE_TIME], from_variable(sc, RH_SETTING_CYCLE_TIME));
    return;
  }
  /* NCCL's own variables speak of NCCL: on another network model a tree, NVLS or a protocol from
   * them applies to nothing here, and they are named as ignored (an RH_* variable or the
   * scenario asking for one is an error, below) */
  if (cl->net_model != RH_NET_NCCL) {
    int k = 0;
    for (int id = 0; id < RH_SETTING_COUNT; id++) {
      const char *v = sc->settings.variable[id];
      double x = sc->settings.value[id]; /* a choice's index for these two; bytes for others */
      bool nccl_only = id == RH_SETTING_PROTOCOL ? x != RH_PROTO_AUTO
                       : id == RH_SETTING_ALGORITHM && (x == RH_ALGO_TREE || x == RH_ALGO_NVLS);
      if (!v || strncmp(v, "NCCL_", 5) != 0 || !nccl_only || k >= 2) continue;
      sc->settings.unused[k++] = v;
      sc->settings.value[id] = rh__setting_defs[id].default_value;
      sc->settings.source[id] = RH_SOURCE_DEFAULT;
      sc->settings.variable[id] = NULL;
    }
  }
  int algo = (int)sc->settings.value[RH_SETTING_ALGORITHM];
  if (cl->net_model != RH_NET_NCCL && (algo == RH_ALGO_TREE || algo == RH_ALGO_NVLS)) {
    fail(w, node_at(w->doc, "collective.algorithm"), "collective.algorithm",
         "%s%s is one of NCCL's algorithms: it needs cluster.network_model: nccl",
         algo == RH_ALGO_TREE ? "tree" : "nvls", from_variable(sc, RH_SETTING_ALGORITHM));
    return;
  }
  if (cl->net_model != RH_NET_NCCL && (int)sc->settings.value[RH_SETTING_PROTOCOL] != RH_PROTO_AUTO) {
    fail(w, node_at(w->doc, "collective.protocol"), "collective.protocol",
         "NCCL's protocols%s need cluster.network_model: nccl",
         from_variable(sc, RH_SETTING_PROTOCOL));
    return;
  }
  if (cl->nodes > 1 && cl->nic_bw <= 0)
    fail(w, node_at(w->doc, "cluster"), "cluster.network",
         "missing: a cluster of %d nodes needs a network section with nic_Gbps", cl->nodes);
  if (w->cluster_only && !(cl->gpu_flops > 0)) { /* a GPU given by its peaks alone */
    for (int p = 0; p < RH_PREC_COUNT; p++) cl->gpu_flops = fmax(cl->gpu_flops, sc->compute.peaks[p]);
    if (!(cl->gpu_flops > 0))
      fail(w, node_at(w->doc, "cluster.gpu"), "cluster.gpu.tflops", "missing (required)");
  }
  if (w->cluster_only) return; /* a collective or a platform needs no model, data or recipe */
  bool real = sc->model.kind != 0;
  if (!finish_model(w)) return;
  bool layer_flops = sc->model.nlayers > 0 && sc->model.layers[0].flops_given;
  if (!real && sc->model.forward_flops <= 0 && !layer_flops) {
    fail(w, node_at(w->doc, "model"), "model.forward_gflops_per_sample",
         "missing (required for a timing-only model; kind softmax, mlp or net computes it)");
    return;
  }
  if (sc->data.source == 0 && sc->data.train <= 0) {
    fail(w, node_at(w->doc, "data"), "data.train_samples", "missing (required for synthetic data)");
    return;
  }
  if (sc->data.source != RH_DATA_SYNTHETIC) {
    if (!real) {
      fail(w, node_at(w->doc, "data.source"), "data.source",
           "%s data need a real model (model.kind softmax, mlp or net)",
           data_sources[sc->data.source]);
      return;
    }
    if (sc->data.source == RH_DATA_FASHION_MNIST) {
      const char *bad = sc->data.train_images          ? "data.train_images"
                          : sc->data.train_labels      ? "data.train_labels"
                          : sc->data.validation_images ? "data.validation_images"
                          : sc->data.validation_labels ? "data.validation_labels"
                                                       : NULL;
      if (bad) {
        fail(w, node_at(w->doc, bad), bad,
             "source fashion-mnist reads Debian's files (%s); give source: idx for other files",
             rh_datasets_dir());
        return;
      }
    }
    if (sc->data.source == RH_DATA_FASHION_MNIST) {
      /* Debian's dataset-fashion-mnist: the training set, and the test set for validation */
      const char *dir = rh_datasets_dir();
      char buf[1100];
      static const char *const files[4] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
      char **dst[4] = {&sc->data.train_images, &sc->data.train_labels,
                       &sc->data.validation_images, &sc->data.validation_labels};
      for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof buf, "%s/%s", dir, files[i]);
        *dst[i] = strdup(buf);
        if (!*dst[i]) {
          fail(w, node_at(w->doc, "data"), "data.source", "out of memory");
          return;
        }
      }
    }
    if (!sc->data.train_images ||
        (sc->data.source != RH_DATA_CIFAR10 && !sc->data.train_labels)) {
      fail(w, node_at(w->doc, "data"), sc->data.train_images ? "data.train_labels" : "data.train_images",
           "missing (required with source: %s)", data_sources[sc->data.source]);
      return;
    }
    if (sc->data.source == RH_DATA_CIFAR10 && (sc->data.train_labels || sc->data.validation_labels)) {
      const char *at = sc->data.train_labels ? "data.train_labels" : "data.validation_labels";
      fail(w, node_at(w->doc, at), at, "CIFAR-10's batches hold their labels: give the images only");
      return;
    }
    if (sc->data.source != RH_DATA_CIFAR10 &&
        !sc->data.validation_images != !sc->data.validation_labels) {
      fail(w, node_at(w->doc, "data"),
           sc->data.validation_images ? "data.validation_labels" : "data.validation_images",
           "missing: validation images and labels come together");
      return;
    }
    if (!check_data_files(w)) return;
  }
  if (!check_model_layers(w)) return;
  if (sc->recipe.sampler_seed < 0) /* DistributedSampler's default seed is 0 */
    sc->recipe.sampler_seed = sc->recipe.shuffle == RH_SHUFFLE_TORCH ? 0 : sc->recipe.seed;
  if (!finish_sharding(w) || !finish_wrap(w)) return;
  /* gradient accumulation: a step's batch is its micro-batches' */
  sc->recipe.micro_batch = sc->recipe.batch;
  if (sc->recipe.accumulation > 1) {
    if (real) {
      fail(w, node_at(w->doc, "recipe.gradient_accumulation"), "recipe.gradient_accumulation",
           "is for timing models (a real model computes its batch's gradients at once)");
      return;
    }
    if (sc->recipe.val_batch <= 0) sc->recipe.val_batch = sc->recipe.batch;
    sc->recipe.batch *= sc->recipe.accumulation;
  }
  if (!w->failed && !real) {
    const char *at = NULL, *why = rh__scenario_compute_finish(sc, &at);
    if (why) {
      fail(w, node_at(w->doc, at), at, "%s", why);
      return;
    }
  }
  if (!w->failed && !(cl->gpu_flops > 0)) {
    fail(w, node_at(w->doc, "cluster.gpu"), "cluster.gpu.tflops", "missing (required)");
    return;
  }
  int k = sc->checks.resume_from_epoch, every = sc->recipe.checkpoint_every;
  if (!w->failed && k > 0 && real && (every == 0 || k % every != 0))
    fail(w, node_at(w->doc, "checks.resume_from_epoch"), "checks.resume_from_epoch",
         every == 0 ? "needs checkpoints, but recipe.checkpoint_every_epochs is 0"
                    : "%d is not an epoch with a checkpoint (recipe.checkpoint_every_epochs is %d)",
         k, every);
  if (!w->failed && sc->data.train > 0 && rh_scenario_steps_per_epoch(sc) < 1)
    fail(w, node_at(w->doc, "data.train_samples"), "data.train_samples",
         "%.17g samples give no full step: %d workers x batch %.17g need %.17g per step",
         sc->data.train, rh_scenario_size(sc), sc->recipe.batch,
         sc->recipe.batch * rh_scenario_size(sc));
  if (!w->failed) check_length(w);
  for (int i = 0; i < sc->failures.nevents && !w->failed; i++) check_event(w, i);
  if (!w->failed) check_elastic(w);
}

/* ---- entry points ------------------------------------------------------------------------- */

void rh_scenario_cost(long gpus, double *seconds, double *mib) {
  /* bench_run on scenarios/scale/dp-loop.yaml (10 steps, nodes of 8 GPUs, 2-core EPYC): wall
   * time and peak memory; between two, on the line through them in log-log; past the last, on
   * the last one's slope (x2.3 in time and x2.0 in memory per doubling there) */
  static const double at[][3] = {{16384, 14.4, 782}, {65536, 55.6, 3027}, {131072, 128.2, 5952}};
  enum { N = sizeof at / sizeof at[0] };
  double g = (double)gpus;
  int k = 0;
  while (k < N - 2 && g > at[k + 1][0]) k++;
  double x = log(g / at[k][0]) / log(at[k + 1][0] / at[k][0]);
  if (g < at[0][0]) { /* below the first: in proportion */
    *seconds = at[0][1] * g / at[0][0];
    *mib = at[0][2] * g / at[0][0];
    return;
  }
  *seconds = at[k][1] * pow(at[k + 1][1] / at[k][1], x);
  *mib = at[k][2] * pow(at[k + 1][2] / at[k][2], x);
}

int rh_scenario_size(const rh_scenario *sc) { return rh_cluster_size(&sc->cluster); }

/* An override's nodes carry SET_LINE + its index as their mark, one more as their line. */
bool rh_scenario_line_is_set(int line) { return line > SET_LINE; }

const char *rh_scenario_event_origin(int line, int index, char *buf, size_t len) {
  if (rh_scenario_line_is_set(line))
    snprintf(buf, len, "--set failures.events, event %d", index + 1);
  else
    snprintf(buf, len, "line %d", line);
  return buf;
}

rh_status rh_scenario_view_init(const rh_scenario *sc, rh_scenario_view *view) {
  rh_status st = rh_topology_init(&view->topo, sc->cluster.gpus_per_node, sc->cluster.nodes);
  if (st == RH_OK) rh_ctx_init(&view->ctx, 0, &view->topo, &sc->settings, &sc->cluster, NULL, NULL);
  return st;
}

long rh_scenario_steps_per_epoch(const rh_scenario *sc) {
  return rh_recipe_steps_per_epoch((rh_steps_rule)sc->recipe.steps_rule, (long)sc->data.train,
                                   (long)sc->recipe.batch, rh_scenario_size(sc));
}

/* ---- command-line overrides ------------------------------------------------------------- */

static void mark(yaml_document_t *doc, int id, int index) {
  doc->nodes.start[id - 1].start_mark.line = (size_t)SET_LINE + (size_t)index;
}

/* Copies node `id` of `from` (an override's value) into `to`; returns its id there, or 0. */
static int copy_node(yaml_document_t *to, yaml_document_t *from, int id, int index) {
  yaml_node_t *n = yaml_document_get_node(from, id);
  int made = 0;
  if (n->type == YAML_SCALAR_NODE) {
    made = yaml_document_add_scalar(to, n->tag, n->data.scalar.value, (int)n->data.scalar.length,
                                    n->data.scalar.style);
  } else if (n->type == YAML_SEQUENCE_NODE) {
    made = yaml_document_add_sequence(to, n->tag, YAML_FLOW_SEQUENCE_STYLE);
    for (yaml_node_item_t *it = n->data.sequence.items.start; made && it < n->data.sequence.items.top; it++) {
      int kid = copy_node(to, from, *it, index);
      if (!kid || !yaml_document_append_sequence_item(to, made, kid)) return 0;
    }
  } else {
    made = yaml_document_add_mapping(to, n->tag, YAML_FLOW_MAPPING_STYLE);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; made && p < n->data.mapping.pairs.top; p++) {
      int k = copy_node(to, from, p->key, index), v = copy_node(to, from, p->value, index);
      if (!k || !v || !yaml_document_append_mapping_pair(to, made, k, v)) return 0;
    }
  }
  if (made) mark(to, made, index);
  return made;
}

/* The pair index of `key` in mapping `map`, or -1. */
static int find_pair(yaml_document_t *doc, int map, const char *key) {
  yaml_node_t *m = yaml_document_get_node(doc, map);
  for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    if (k->type == YAML_SCALAR_NODE && strcmp(scalar(k), key) == 0)
      return (int)(p - m->data.mapping.pairs.start);
  }
  return -1;
}

/* Whether the YAML text uses an anchor (&a) or an alias (*a), read as events (in bounded
 * memory, whatever they would expand to); a text that does not parse says no, for the load to
 * name its error. */
static bool uses_alias(const char *text, size_t len) {
  yaml_parser_t parser;
  yaml_event_t ev;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  bool alias = false, done = false;
  while (!alias && !done && yaml_parser_parse(&parser, &ev)) {
    alias = ev.type == YAML_ALIAS_EVENT ||
            (ev.type == YAML_SCALAR_EVENT && ev.data.scalar.anchor) ||
            (ev.type == YAML_SEQUENCE_START_EVENT && ev.data.sequence_start.anchor) ||
            (ev.type == YAML_MAPPING_START_EVENT && ev.data.mapping_start.anchor);
    done = ev.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&ev);
  }
  yaml_parser_delete(&parser);
  return alias;
}

/* Applies `--set KEY=VALUE` (override number `index`) to the loaded file: the dotted KEY's value
 * is replaced, or the key is added with the mappings on its way.  0, or -1 with a message. */
static int apply_set(yaml_document_t *doc, const char *set, int index, char *err, size_t errlen) {
  const char *eq = strchr(set, '=');
  char key[200];
  if (!eq || eq == set || (size_t)(eq - set) >= sizeof key || eq[-1] == '.' || set[0] == '.') {
    snprintf(err, errlen, "--set %s: expected KEY=VALUE, KEY a dotted path such as cluster.nodes", set);
    return -1;
  }
  snprintf(key, sizeof key, "%.*s", (int)(eq - set), set);
  if (strstr(key, "..")) { /* an empty step in the KEY; the VALUE may hold "..", as in ../data */
    snprintf(err, errlen, "--set %s: expected KEY=VALUE, KEY a dotted path such as cluster.nodes", set);
    return -1;
  }
  if (too_deep(eq + 1, strlen(eq + 1))) {
    snprintf(err, errlen, "--set %s: the value nests [ ] and { } more than %d levels", set,
             YAML_MAX_FLOW_DEPTH);
    return -1;
  }
  /* an alias is copied into the scenario once for each use: nine nested nines of them in 400
   * bytes are 387 million nodes */
  if (uses_alias(eq + 1, strlen(eq + 1))) {
    snprintf(err, errlen, "--set %s=%.40s%s: the value uses YAML anchors or aliases (&NAME, "
             "*NAME), which --set does not take: write the value out", key, eq + 1,
             strlen(eq + 1) > 40 ? "..." : "");
    return -1;
  }
  yaml_parser_t parser;
  yaml_document_t value;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, (const unsigned char *)eq + 1, strlen(eq + 1));
  bool parsed = yaml_parser_load(&parser, &value);
  yaml_parser_delete(&parser);
  if (!parsed || !yaml_document_get_root_node(&value)) {
    snprintf(err, errlen, "--set %s: the value is %s", set, parsed ? "empty" : "not a YAML value");
    if (parsed) yaml_document_delete(&value);
    return -1;
  }
  int at = 1; /* the root */
  int rc = 0;
  for (char *save = NULL, *seg = strtok_r(key, ".", &save); seg && rc == 0;) {
    char *next = strtok_r(NULL, ".", &save);
    yaml_node_t *m = yaml_document_get_node(doc, at);
    if (m->type != YAML_MAPPING_NODE) {
      snprintf(err, errlen, "--set %s: %.*s holds %s, not keys", set,
               seg == key ? 12 : (int)(seg - key - 1), seg == key ? "the scenario" : key,
               type_word(m));
      rc = -1;
      break;
    }
    int pair = find_pair(doc, at, seg);
    int id = next ? 0 : copy_node(doc, &value, 1, index);
    if (!next && !id) rc = -1;
    else if (pair >= 0) {
      yaml_node_pair_t *p = yaml_document_get_node(doc, at)->data.mapping.pairs.start + pair;
      mark(doc, p->key, index);
      if (next) at = p->value;
      else p->value = id;
    } else {
      if (next) id = yaml_document_add_mapping(doc, NULL, YAML_BLOCK_MAPPING_STYLE);
      int k = yaml_document_add_scalar(doc, NULL, (yaml_char_t *)seg, -1, YAML_PLAIN_SCALAR_STYLE);
      if (!id || !k || !yaml_document_append_mapping_pair(doc, at, k, id)) rc = -1;
      else {
        mark(doc, k, index);
        mark(doc, id, index);
        at = id;
      }
    }
    if (rc == 0 && next) seg[strlen(seg)] = '.'; /* the path so far, for a message */
    seg = next;
  }
  if (rc != 0 && !err[0]) snprintf(err, errlen, "--set %s: out of memory", set);
  yaml_document_delete(&value);
  return rc;
}

rh_status rh_scenario_load(const char *path, rh_scenario *sc, char *err, size_t errlen) {
  return rh_scenario_load_opts(path, NULL, sc, err, errlen);
}

rh_status rh_scenario_load_opts(const char *path, const rh_scenario_opts *opts, rh_scenario *sc,
                                char *err, size_t errlen) {
  static const rh_scenario_opts none = {0};
  if (!opts) opts = &none;
  *sc = (rh_scenario){0};
  err[0] = 0;
  init_collective_fields();
  if (rh_settings_init(&sc->settings, err, errlen) != RH_OK) return RH_ERR_INVALID;
  rh__scenario_defaults(sc);
  size_t len = 0;
  rh_status st;
  char *text = read_yaml(path, &len, err, errlen, &st);
  if (!text) return st;
  sc->path = strdup(path);
  yaml_parser_t parser;
  yaml_document_t doc;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  struct provided provided = {0};
  walker w = {.doc = &doc, .sc = sc, .base = (char *)sc, .path = path, .err = err,
              .errlen = errlen, .provided = &provided, .sets = opts->sets,
              .cluster_only = opts->cluster_only, .model_only = opts->model_only,
              .real_target = opts->real_target};
  if (!yaml_parser_load(&parser, &doc)) {
    /* libyaml gives up where it noticed (often the end of the file); the construct it was in
     * began at context_mark, which is where a person has to look */
    bool ctx = parser.context && (strstr(parser.context, "scanning") || strstr(parser.context, "flow"));
    snprintf(err, errlen, "%s:%d: YAML syntax error: %s%s%s (noticed at line %d)", path,
             (int)(ctx ? parser.context_mark.line : parser.problem_mark.line) + 1,
             ctx ? parser.context : "", ctx ? ", " : "",
             parser.problem ? parser.problem : "unreadable", (int)parser.problem_mark.line + 1);
    yaml_parser_delete(&parser);
    free(text);
    rh_scenario_free(sc);
    return RH_ERR_INVALID;
  }
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (!root) {
    snprintf(err, errlen, "%s:1: the file is empty (expected a scenario mapping)", path);
    w.failed = true;
  } else if (root->type != YAML_MAPPING_NODE) {
    fail(&w, root, "scenario", "expected a mapping at the top level, got %s", type_word(root));
  } else {
    for (int i = 0; i < opts->nsets && !w.failed; i++)
      w.failed = apply_set(&doc, opts->sets[i], i, err, errlen) != 0;
    if (!w.failed) walk_map(&w, NULL, yaml_document_get_root_node(&doc), top_fields, "");
    if (!w.failed) check_whole(&w);
  }
  if (!w.failed) { /* one scenario per file: a second document is a mistake, not ignored */
    yaml_document_t more;
    if (yaml_parser_load(&parser, &more)) {
      yaml_node_t *r2 = yaml_document_get_root_node(&more);
      if (r2) {
        snprintf(err, errlen, "%s:%d: scenario: a second YAML document; a file holds one scenario",
                 path, (int)r2->start_mark.line + 1);
        w.failed = true;
      }
      yaml_document_delete(&more);
    }
  }
  yaml_document_delete(&doc);
  yaml_parser_delete(&parser);
  free(text);
  if (w.failed) {
    rh_scenario_free(sc);
    return RH_ERR_INVALID;
  }
  return RH_OK;
}

void rh_scenario_free(rh_scenario *sc) {
  free(sc->path);
  free(sc->name);
  free(sc->description);
  free(sc->cluster.gpus_per_node);
  free(sc->model.name);
  free(sc->model.init_from);
  free(sc->checks.accuracy_baseline);
  free(sc->compute.tflops_model);
  free(sc->compute.gpu_name);
  free(sc->framework.name);
  free(sc->compute.kernel_table);
  free(sc->data.train_images);
  free(sc->data.train_labels);
  free(sc->data.validation_images);
  free(sc->data.validation_labels);
  free(sc->recipe.decay_epochs);
  free(sc->failures.events);
  for (int i = 0; i < sc->failures.ncauses; i++) free(sc->failures.causes[i].name);
  free(sc->failures.causes);
  free(sc->failures.source);
  free(sc->elastic.changes);
  for (int i = 0; i < sc->sweep.naxes; i++) {
    for (int j = 0; j < sc->sweep.axes[i].nvalues; j++) free(sc->sweep.axes[i].values[j]);
    free(sc->sweep.axes[i].values);
    free(sc->sweep.axes[i].key);
  }
  free(sc->sweep.axes);
  for (int i = 0; i < sc->model.nlayers; i++) free(sc->model.layers[i].name);
  free(sc->model.layers);
  *sc = (rh_scenario){0};
}

/* ---- the runtime's forms ---------------------------------------------------------------- */

static rh_status fault_plan(const rh_scenario *sc, rh_fault_plan *plan) {
  *plan = (rh_fault_plan){.gpu_mtbf = sc->failures.gpu_mtbf_h * 3600,
                          .node_mtbf = sc->failures.node_mtbf_h * 3600,
                          .seed = (uint64_t)sc->failures.seed};
  int n = sc->failures.nevents;
  rh_fault *f = calloc((size_t)(n ? n : 1), sizeof *f);
  if (!f) return RH_ERR_NOMEM;
  for (int i = 0; i < n; i++) {
    const rh_scenario_fault *e = &sc->failures.events[i];
    bool step_trigger = e->epoch > 0;
    f[i] = (rh_fault){.kind = (rh_fault_kind)e->kind, .node = e->node, .gpu = e->gpu,
                      .uplink = e->link == 0, .at = e->at_s,
                      .epoch = step_trigger ? (int)e->epoch - 1 : -1,
                      .step = step_trigger ? (long)(e->step > 0 ? e->step : 1) - 1 : -1,
                      .during = e->during < 0 ? RH_PHASE_NONE : (rh_phase)(e->during + 1),
                      .after = e->after_ms * 1e-3,
                      .duration = e->duration_s < 0 ? INFINITY : e->duration_s,
                      .factor = e->factor < 0 ? 1 : e->factor,
                      .extra_latency = e->extra_latency_us * 1e-6, .line = e->line};
  }
  plan->faults = f;
  plan->nfaults = n;
  return RH_OK;
}

static rh_status elastic(const rh_scenario *sc, rh_elastic_config *el) {
  *el = (rh_elastic_config){
      .min_np = sc->elastic.min_np > 0 ? sc->elastic.min_np : rh_scenario_size(sc),
      .max_np = sc->elastic.max_np, .rendezvous = sc->elastic.rendezvous_s,
      .rendezvous_timeout = sc->elastic.rendezvous_timeout_s,
      .slots_timeout = sc->elastic.timeout_s, .worker_start = sc->elastic.worker_start_s,
      .discovery_interval = sc->elastic.discovery_interval_s, .commit_bw = sc->elastic.commit_bw};
  int n = sc->elastic.nchanges;
  if (n == 0) return RH_OK;
  rh_host_change *changes = calloc((size_t)n, sizeof *changes);
  if (!changes) return RH_ERR_NOMEM;
  for (int i = 0; i < n; i++) {
    const rh_scenario_change *c = &sc->elastic.changes[i];
    changes[i] = (rh_host_change){.at = c->at_s, .node = c->add >= 0 ? c->add : c->remove,
                                  .added = c->add >= 0, .line = c->line};
  }
  el->changes = changes;
  el->nchanges = n;
  return RH_OK;
}

rh_status rh_scenario_launch_init(const rh_scenario *sc, rh_scenario_launch *l) {
  *l = (rh_scenario_launch){.config = {.cluster = &sc->cluster, .settings = &sc->settings}};
  l->has_plan = sc->failures.nevents > 0 || sc->failures.gpu_mtbf_h > 0 || sc->failures.node_mtbf_h > 0;
  l->has_elastic = sc->elastic.present;
  l->has_restart = sc->restart.present && sc->restart.policy != 0;
  rh_status st = l->has_plan ? fault_plan(sc, &l->plan) : RH_OK;
  if (st == RH_OK && l->has_elastic) st = elastic(sc, &l->elastic);
  if (st != RH_OK) {
    rh_scenario_launch_free(l);
    return st;
  }
  if (l->has_restart)
    l->restart = (rh_restart_config){.relaunch = sc->restart.relaunch_s,
                                     .max_restarts = sc->restart.max_restarts};
  l->config.faults = l->has_plan ? &l->plan : NULL;
  l->config.elastic = l->has_elastic ? &l->elastic : NULL;
  l->config.restart = l->has_restart ? &l->restart : NULL;
  return RH_OK;
}

void rh_scenario_launch_free(rh_scenario_launch *l) {
  free((void *)l->plan.faults);
  free((void *)l->elastic.changes);
  *l = (rh_scenario_launch){0};
}

const char *rh_datasets_dir(void) {
  const char *env = getenv("RH_DATASETS");
  return env && *env ? env : "/usr/share/datasets/fashion-mnist";
}
