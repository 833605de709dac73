/*
 * cnn.c: the convolutional family (see family.h): torchvision's ResNet-50/101/152 (v1.5: the
 * stride on the 3x3 convolution) and ResNeXt-50 32x4d and 101 32x8d and 32x4d (the same blocks, their 3x3
 * convolution grouped and wider), VGG-16 and Inception v3 (with its auxiliary head, which runs in
 * training), the CIFAR-10 CNN of the AWS workshop (its Keras model_def: six 3x3 convolutions with
 * batch norm, a 512-unit dense layer) and the Fashion-MNIST lab's WRN-16-10 (Zagoruyko &
 * Komodakis 2016, pre-activation blocks, as Horovod's tutorial builds it); and the seeds' networks
 * that also train for real (net/net.h: Horovod's MNIST Net, LeNet-5, the Keras and TensorFlow
 * CNNs), whose layers come from the same definitions the training runs.  One layer per module:
 * a convolution, its batch norm, its ReLU, a pool, a linear layer.  Traffic: a convolution reads
 * its input and writes its output; batch norm reads its input twice (statistics, then the
 * normalisation) and writes once; ReLU and pools read and write; a residual add reads two and
 * writes one.  Activations: each module's output (an in-place ReLU keeps none of its own).
 */
#include "family.h"
#include "net/net.h"

#include <stdio.h>
#include <string.h>

/* the networks written here, then net.h's (rh_net_names, in its order: test_families checks) */
const char *const rh_cnn_names[] = {"resnet50", "resnet101", "resnet152", "vgg16", "inception_v3",
                                    "cifar10_workshop", "wrn16_10", "resnext50_32x4d",
                                    "resnext101_32x8d", "resnext101_32x4d", "resnet18_cifar", "mnist_net", "lenet5", "keras_mnist_cnn",
                                    "tf_mnist_cnn", "keras_fmnist_cnn", "keras_cifar10_cnn", NULL};
enum { RESNET50, RESNET101, RESNET152, VGG16, INCEPTION_V3, CIFAR10_WORKSHOP, WRN16_10,
       RESNEXT50_32X4D, RESNEXT101_32X8D, RESNEXT101_32X4D, RESNET18_CIFAR, FIRST_NET };

int rh_cnn_default_classes(int which) {
  return which >= FIRST_NET || which == CIFAR10_WORKSHOP || which == WRN16_10 ||
                 which == RESNET18_CIFAR
             ? 10
             : 1000;
}

int rh_cnn_default_image(int which) {
  if (which >= FIRST_NET) return rh_nets[which - FIRST_NET]->rows;
  switch (which) {
  case INCEPTION_V3: return 299;
  case WRN16_10: return 28;
  case RESNET18_CIFAR: return 32;
  case CIFAR10_WORKSHOP: return 32;
  default: return 224;
  }
}

int rh_cnn_default_channels(int which) {
  if (which >= FIRST_NET) return rh_nets[which - FIRST_NET]->channels;
  return which == WRN16_10 ? 1 : 3;
}

/* The tensor flowing through the network: channels x height x width. */
typedef struct shape {
  double c, h, w;
} shape;

typedef struct net {
  rh_layers *out;
  shape x;
  bool too_small;
} net;

static double size_of(shape s) { return s.c * s.h * s.w; }

static void conv_hw(net *n, int kh, int kw, int stride, int ph, int pw) {
  double h = (n->x.h + 2 * ph - kh) / stride + 1, w = (n->x.w + 2 * pw - kw) / stride + 1;
  if (h < 1 || w < 1) n->too_small = true;
  n->x.h = h < 1 ? 1 : (double)(long)h;
  n->x.w = w < 1 ? 1 : (double)(long)w;
}

/* a convolution of `groups` groups: each output channel sees in.c / groups input channels */
static void conv_grouped(net *n, const char *name, int cout, int kh, int kw, int stride, int ph,
                         int pw, bool bias, int groups) {
  shape in = n->x;
  conv_hw(n, kh, kw, stride, ph, pw);
  n->x.c = cout;
  double out = size_of(n->x), fan_in = in.c / groups * kh * kw;
  rh_layers_add(n->out, cout * fan_in + (bias ? cout : 0), 2 * out * fan_in, size_of(in) + out, out,
                "%s", name);
  rh_layers_shape(n->out, (rh_layer_op){.kind = RH_LAYER_GEMM, .sub = 1, .m = n->x.h * n->x.w, .n = cout,
                                        .k = fan_in, .groups = groups, .bias = bias,
                                        .kernel = kh == kw ? kh : 0, .stride = stride,
                                        .first = n->out->n == 1, .in = size_of(in)});
}

static void conv2(net *n, const char *name, int cout, int kh, int kw, int stride, int ph, int pw,
                  bool bias) {
  conv_grouped(n, name, cout, kh, kw, stride, ph, pw, bias, 1);
}

static void conv(net *n, const char *name, int cout, int k, int stride, int pad, bool bias) {
  conv2(n, name, cout, k, k, stride, pad, pad, bias);
}

static void bn(net *n, const char *name) {
  double v = size_of(n->x);
  rh_layers_add(n->out, 2 * n->x.c, 0, 3 * v, v, "%s", name);
  rh_layers_shape(n->out, (rh_layer_op){.kind = RH_LAYER_NORM, .values = v, .n = n->x.c});
}

static void relu(net *n, const char *name, bool inplace) {
  double v = size_of(n->x);
  rh_layers_add(n->out, 0, 0, 2 * v, inplace ? 0 : v, "%s", name);
  rh_layers_shape(n->out, (rh_layer_op){.kind = RH_LAYER_ACT, .values = v});
}

/* a max pool, or an average one (avg) */
static void pool_of(net *n, const char *name, int k, int stride, int pad, bool avg) {
  double in = size_of(n->x);
  conv_hw(n, k, k, stride, pad, pad);
  double v = size_of(n->x);
  rh_layers_add(n->out, 0, 0, in + v, v, "%s", name);
  rh_layers_shape(n->out, (rh_layer_op){.kind = RH_LAYER_POOL, .sub = avg, .values = v, .in = in});
}

static void pool(net *n, const char *name, int k, int stride, int pad) {
  pool_of(n, name, k, stride, pad, false);
}

/* adaptive average pooling to side x side */
static void adaptive_pool(net *n, const char *name, int side) {
  double in = size_of(n->x);
  n->x.h = n->x.w = side;
  double v = size_of(n->x);
  rh_layers_add(n->out, 0, 0, in + v, v, "%s", name);
  rh_layers_shape(n->out, (rh_layer_op){.kind = RH_LAYER_POOL, .sub = 1, .values = v, .in = in});
}

static void linear(net *n, const char *name, int outs, bool bias) {
  double in = size_of(n->x);
  rh_layers_add(n->out, in * outs + (bias ? outs : 0), 2 * in * outs, in + outs, outs, "%s", name);
  rh_layers_shape(n->out, (rh_layer_op){.kind = RH_LAYER_GEMM, .m = 1, .n = outs, .k = in,
                                        .groups = 1, .bias = bias, .in = in});
  n->x = (shape){outs, 1, 1};
}

static void add(net *n, const char *name) {
  double v = size_of(n->x);
  rh_layers_add(n->out, 0, 0, 3 * v, 0, "%s", name);
  rh_layers_shape(n->out, (rh_layer_op){.kind = RH_LAYER_ADD, .values = v});
}

/* ---- ResNet (torchvision) ------------------------------------------------------------------- */

/* torchvision's Bottleneck: planes x 4 out; its 3x3 convolution `width` wide in `groups` groups
 * (width = planes x base_width / 64 x groups: planes for ResNet) */
static void bottleneck(net *n, const char *p, int planes, int width, int groups, int stride,
                       bool downsample) {
  char name[96];
  shape in = n->x;
#define NAME(suffix) (snprintf(name, sizeof name, "%s.%s", p, suffix), name)
  conv(n, NAME("conv1"), width, 1, 1, 0, false);
  bn(n, NAME("bn1"));
  relu(n, NAME("relu1"), true);
  conv_grouped(n, NAME("conv2"), width, 3, 3, stride, 1, 1, false, groups);
  bn(n, NAME("bn2"));
  relu(n, NAME("relu2"), true);
  conv(n, NAME("conv3"), planes * 4, 1, 1, 0, false);
  bn(n, NAME("bn3"));
  if (downsample) {
    shape main = n->x;
    n->x = in;
    conv(n, NAME("downsample.0"), planes * 4, 1, stride, 0, false);
    bn(n, NAME("downsample.1"));
    n->x = main;
  }
  add(n, NAME("add"));
  relu(n, NAME("relu3"), true);
#undef NAME
}

static void resnet(net *n, const int blocks[4], int groups, int base_width, int classes) {
  conv(n, "conv1", 64, 7, 2, 3, false);
  bn(n, "bn1");
  relu(n, "relu", true);
  pool(n, "maxpool", 3, 2, 1);
  for (int g = 0; g < 4; g++)
    for (int b = 0; b < blocks[g]; b++) {
      char p[32];
      snprintf(p, sizeof p, "layer%d.%d", g + 1, b);
      int stride = b == 0 && g > 0 ? 2 : 1;
      int planes = 64 << g;
      bottleneck(n, p, planes, planes * base_width / 64 * groups, groups, stride, b == 0);
    }
  adaptive_pool(n, "avgpool", 1);
  linear(n, "fc", classes, true);
}

/* ResNet-18 for CIFAR-10 as kuangliu/pytorch-cifar writes it (Gavel's workload): a 3x3 stem of
 * 64 without a pool, four stages of two basic blocks (3x3, 3x3; a 1x1 projection with batch norm
 * where the shape changes) of 64 to 512 channels, a 4x4 average pool, the classifier. */
static void basic_block(net *n, const char *p, int planes, int stride) {
  char name[96];
  shape in = n->x;
#define NAME(suffix) (snprintf(name, sizeof name, "%s.%s", p, suffix), name)
  conv(n, NAME("conv1"), planes, 3, stride, 1, false);
  bn(n, NAME("bn1"));
  relu(n, NAME("relu1"), true);
  conv(n, NAME("conv2"), planes, 3, 1, 1, false);
  bn(n, NAME("bn2"));
  if (stride != 1 || in.c != planes) {
    shape main = n->x;
    n->x = in;
    conv(n, NAME("shortcut.0"), planes, 1, stride, 0, false);
    bn(n, NAME("shortcut.1"));
    n->x = main;
  }
  add(n, NAME("add"));
  relu(n, NAME("relu2"), true);
#undef NAME
}

static void resnet18_cifar(net *n, int classes) {
  conv(n, "conv1", 64, 3, 1, 1, false);
  bn(n, "bn1");
  relu(n, "relu", true);
  for (int g = 0; g < 4; g++)
    for (int b = 0; b < 2; b++) {
      char p[32];
      snprintf(p, sizeof p, "layer%d.%d", g + 1, b);
      basic_block(n, p, 64 << g, b == 0 && g > 0 ? 2 : 1);
    }
  pool_of(n, "avgpool", 4, 4, 0, true);
  linear(n, "linear", classes, true);
}

/* ---- VGG-16 (torchvision, configuration D, no batch norm) ----------------------------------- */

static void vgg16(net *n, int classes) {
  static const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0,
                            512, 512, 512, 0};
  int k = 0;
  for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++, k++) {
    char name[32];
    snprintf(name, sizeof name, "features.%d", k);
    if (!cfg[i]) {
      pool(n, name, 2, 2, 0);
      continue;
    }
    conv(n, name, cfg[i], 3, 1, 1, true);
    snprintf(name, sizeof name, "features.%d", ++k);
    relu(n, name, true);
  }
  adaptive_pool(n, "avgpool", 7);
  linear(n, "classifier.0", 4096, true);
  relu(n, "classifier.1", true);
  linear(n, "classifier.3", 4096, true);
  relu(n, "classifier.4", true);
  linear(n, "classifier.6", classes, true);
}

/* ---- Inception v3 (torchvision) ------------------------------------------------------------- */

/* BasicConv2d: a convolution without bias, batch norm, ReLU */
static void basic(net *n, const char *p, const char *b, int cout, int kh, int kw, int stride,
                  int ph, int pw) {
  char name[96];
  snprintf(name, sizeof name, "%s%s%s.conv", p, *b ? "." : "", b);
  conv2(n, name, cout, kh, kw, stride, ph, pw, false);
  snprintf(name, sizeof name, "%s%s%s.bn", p, *b ? "." : "", b);
  bn(n, name);
  snprintf(name, sizeof name, "%s%s%s.relu", p, *b ? "." : "", b);
  relu(n, name, true);
}

/* Branches start from the block's input; their outputs are concatenated (a copy). */
typedef struct branches {
  shape in;
  double c, h, w;
} branches;

static branches fork_at(net *n) { return (branches){.in = n->x}; }
static void branch_end(net *n, branches *b) {
  b->c += n->x.c;
  b->h = n->x.h;
  b->w = n->x.w;
  n->x = b->in;
}
static void join(net *n, branches *b, const char *p) {
  n->x = (shape){b->c, b->h, b->w};
  double v = size_of(n->x);
  rh_layers_add(n->out, 0, 0, 2 * v, v, "%s.cat", p);
  rh_layers_shape(n->out, (rh_layer_op){.kind = RH_LAYER_CONCAT, .values = v});
}

static void avg_branch_pool(net *n, const char *p) {
  char name[96];
  snprintf(name, sizeof name, "%s.pool", p);
  pool_of(n, name, 3, 1, 1, true);
}

static void inception_a(net *n, const char *p, int pool_features) {
  branches b = fork_at(n);
  basic(n, p, "branch1x1", 64, 1, 1, 1, 0, 0);
  branch_end(n, &b);
  basic(n, p, "branch5x5_1", 48, 1, 1, 1, 0, 0);
  basic(n, p, "branch5x5_2", 64, 5, 5, 1, 2, 2);
  branch_end(n, &b);
  basic(n, p, "branch3x3dbl_1", 64, 1, 1, 1, 0, 0);
  basic(n, p, "branch3x3dbl_2", 96, 3, 3, 1, 1, 1);
  basic(n, p, "branch3x3dbl_3", 96, 3, 3, 1, 1, 1);
  branch_end(n, &b);
  avg_branch_pool(n, p);
  basic(n, p, "branch_pool", pool_features, 1, 1, 1, 0, 0);
  branch_end(n, &b);
  join(n, &b, p);
}

static void inception_b(net *n, const char *p) {
  branches b = fork_at(n);
  basic(n, p, "branch3x3", 384, 3, 3, 2, 0, 0);
  branch_end(n, &b);
  basic(n, p, "branch3x3dbl_1", 64, 1, 1, 1, 0, 0);
  basic(n, p, "branch3x3dbl_2", 96, 3, 3, 1, 1, 1);
  basic(n, p, "branch3x3dbl_3", 96, 3, 3, 2, 0, 0);
  branch_end(n, &b);
  char name[96];
  snprintf(name, sizeof name, "%s.maxpool", p);
  pool(n, name, 3, 2, 0);
  branch_end(n, &b);
  join(n, &b, p);
}

static void inception_c(net *n, const char *p, int c7) {
  branches b = fork_at(n);
  basic(n, p, "branch1x1", 192, 1, 1, 1, 0, 0);
  branch_end(n, &b);
  basic(n, p, "branch7x7_1", c7, 1, 1, 1, 0, 0);
  basic(n, p, "branch7x7_2", c7, 1, 7, 1, 0, 3);
  basic(n, p, "branch7x7_3", 192, 7, 1, 1, 3, 0);
  branch_end(n, &b);
  basic(n, p, "branch7x7dbl_1", c7, 1, 1, 1, 0, 0);
  basic(n, p, "branch7x7dbl_2", c7, 7, 1, 1, 3, 0);
  basic(n, p, "branch7x7dbl_3", c7, 1, 7, 1, 0, 3);
  basic(n, p, "branch7x7dbl_4", c7, 7, 1, 1, 3, 0);
  basic(n, p, "branch7x7dbl_5", 192, 1, 7, 1, 0, 3);
  branch_end(n, &b);
  avg_branch_pool(n, p);
  basic(n, p, "branch_pool", 192, 1, 1, 1, 0, 0);
  branch_end(n, &b);
  join(n, &b, p);
}

static void inception_d(net *n, const char *p) {
  branches b = fork_at(n);
  basic(n, p, "branch3x3_1", 192, 1, 1, 1, 0, 0);
  basic(n, p, "branch3x3_2", 320, 3, 3, 2, 0, 0);
  branch_end(n, &b);
  basic(n, p, "branch7x7x3_1", 192, 1, 1, 1, 0, 0);
  basic(n, p, "branch7x7x3_2", 192, 1, 7, 1, 0, 3);
  basic(n, p, "branch7x7x3_3", 192, 7, 1, 1, 3, 0);
  basic(n, p, "branch7x7x3_4", 192, 3, 3, 2, 0, 0);
  branch_end(n, &b);
  char name[96];
  snprintf(name, sizeof name, "%s.maxpool", p);
  pool(n, name, 3, 2, 0);
  branch_end(n, &b);
  join(n, &b, p);
}

static void inception_e(net *n, const char *p) {
  branches b = fork_at(n);
  basic(n, p, "branch1x1", 320, 1, 1, 1, 0, 0);
  branch_end(n, &b);
  basic(n, p, "branch3x3_1", 384, 1, 1, 1, 0, 0);
  shape mid = n->x;
  basic(n, p, "branch3x3_2a", 384, 1, 3, 1, 0, 1);
  branch_end(n, &b);
  n->x = mid;
  basic(n, p, "branch3x3_2b", 384, 3, 1, 1, 1, 0);
  branch_end(n, &b);
  basic(n, p, "branch3x3dbl_1", 448, 1, 1, 1, 0, 0);
  basic(n, p, "branch3x3dbl_2", 384, 3, 3, 1, 1, 1);
  mid = n->x;
  basic(n, p, "branch3x3dbl_3a", 384, 1, 3, 1, 0, 1);
  branch_end(n, &b);
  n->x = mid;
  basic(n, p, "branch3x3dbl_3b", 384, 3, 1, 1, 1, 0);
  branch_end(n, &b);
  avg_branch_pool(n, p);
  basic(n, p, "branch_pool", 192, 1, 1, 1, 0, 0);
  branch_end(n, &b);
  join(n, &b, p);
}

static void inception_v3(net *n, int classes) {
  basic(n, "Conv2d_1a_3x3", "", 32, 3, 3, 2, 0, 0);
  basic(n, "Conv2d_2a_3x3", "", 32, 3, 3, 1, 0, 0);
  basic(n, "Conv2d_2b_3x3", "", 64, 3, 3, 1, 1, 1);
  pool(n, "maxpool1", 3, 2, 0);
  basic(n, "Conv2d_3b_1x1", "", 80, 1, 1, 1, 0, 0);
  basic(n, "Conv2d_4a_3x3", "", 192, 3, 3, 1, 0, 0);
  pool(n, "maxpool2", 3, 2, 0);
  inception_a(n, "Mixed_5b", 32);
  inception_a(n, "Mixed_5c", 64);
  inception_a(n, "Mixed_5d", 64);
  inception_b(n, "Mixed_6a");
  inception_c(n, "Mixed_6b", 128);
  inception_c(n, "Mixed_6c", 160);
  inception_c(n, "Mixed_6d", 160);
  inception_c(n, "Mixed_6e", 192);
  /* the auxiliary head, on Mixed_6e's output (training mode) */
  shape main = n->x;
  pool_of(n, "AuxLogits.pool", 5, 3, 0, true);
  basic(n, "AuxLogits", "conv0", 128, 1, 1, 1, 0, 0);
  basic(n, "AuxLogits", "conv1", 768, 5, 5, 1, 0, 0);
  adaptive_pool(n, "AuxLogits.avgpool", 1);
  linear(n, "AuxLogits.fc", classes, true);
  n->x = main;
  inception_d(n, "Mixed_7a");
  inception_e(n, "Mixed_7b");
  inception_e(n, "Mixed_7c");
  adaptive_pool(n, "avgpool", 1);
  linear(n, "fc", classes, true);
}

/* ---- the seeds' networks -------------------------------------------------------------------- */

/* The AWS workshop's Keras CNN: pairs of 3x3 convolutions (32, 64, 128; 'same' then 'valid'),
 * each with batch norm and ReLU, a 2x2 max pool after each pair, Dense(512), Dense(classes). */
static void cifar10_workshop(net *n, int classes) {
  static const int widths[] = {32, 64, 128};
  for (int g = 0; g < 3; g++)
    for (int j = 0; j < 2; j++) {
      char name[32];
      int k = 2 * g + j + 1;
      snprintf(name, sizeof name, "conv2d_%d", k);
      conv(n, name, widths[g], 3, 1, j == 0 ? 1 : 0, true);
      snprintf(name, sizeof name, "batch_normalization_%d", k);
      bn(n, name);
      snprintf(name, sizeof name, "activation_%d", k);
      relu(n, name, false);
      if (j == 1) {
        snprintf(name, sizeof name, "max_pooling2d_%d", g + 1);
        pool(n, name, 2, 2, 0);
      }
    }
  linear(n, "dense_1", 512, true);
  relu(n, "activation_7", false);
  linear(n, "dense_2", classes, true);
}

/* WRN-16-10: a 3x3 convolution of 16, then three groups of two pre-activation blocks (batch norm,
 * ReLU, 3x3 convolution, twice) of 160, 320 and 640 channels, the first block of a group with a
 * 1x1 projection of its input; then batch norm, ReLU, global average pool, the classifier. */
static void wrn16_10(net *n, int classes) {
  conv(n, "conv1", 16, 3, 1, 1, false);
  for (int g = 0; g < 3; g++)
    for (int b = 0; b < 2; b++) {
      char p[32], name[64];
      snprintf(p, sizeof p, "group%d.%d", g + 1, b);
      int width = 160 << g, stride = b == 0 && g > 0 ? 2 : 1;
      shape in = n->x;
      snprintf(name, sizeof name, "%s.bn1", p);
      bn(n, name);
      snprintf(name, sizeof name, "%s.relu1", p);
      relu(n, name, false);
      shape pre = n->x;
      snprintf(name, sizeof name, "%s.conv1", p);
      conv(n, name, width, 3, stride, 1, false);
      snprintf(name, sizeof name, "%s.bn2", p);
      bn(n, name);
      snprintf(name, sizeof name, "%s.relu2", p);
      relu(n, name, false);
      snprintf(name, sizeof name, "%s.conv2", p);
      conv(n, name, width, 3, 1, 1, false);
      if (in.c != width || stride != 1) {
        shape main = n->x;
        n->x = pre;
        snprintf(name, sizeof name, "%s.shortcut", p);
        conv(n, name, width, 1, stride, 0, false);
        n->x = main;
      }
      snprintf(name, sizeof name, "%s.add", p);
      add(n, name);
    }
  bn(n, "bn");
  relu(n, "relu", false);
  adaptive_pool(n, "avgpool", 1);
  linear(n, "fc", classes, true);
}

bool rh_family_cnn(int which, int image, int channels, int classes, rh_layers *out,
                   const char **why) {
  net n = {.out = out, .x = {channels, image, image}};
  *why = NULL;
  static const int r50[4] = {3, 4, 6, 3}, r101[4] = {3, 4, 23, 3}, r152[4] = {3, 8, 36, 3};
  if (which >= FIRST_NET) { /* the same list the training runs */
    rh_net built;
    *why = rh_net_build(&built, rh_nets[which - FIRST_NET], channels, image, image, classes);
    if (*why) return false;
    if (!rh_net_layers(&built, out)) *why = "out of memory";
    return !*why;
  }
  switch (which) {
  case RESNET50: resnet(&n, r50, 1, 64, classes); break;
  case RESNET101: resnet(&n, r101, 1, 64, classes); break;
  case RESNET152: resnet(&n, r152, 1, 64, classes); break;
  case RESNEXT50_32X4D: resnet(&n, r50, 32, 4, classes); break;
  case RESNEXT101_32X8D: resnet(&n, r101, 32, 8, classes); break;
  case RESNEXT101_32X4D: resnet(&n, r101, 32, 4, classes); break;
  case RESNET18_CIFAR: resnet18_cifar(&n, classes); break;
  case VGG16: vgg16(&n, classes); break;
  case INCEPTION_V3: inception_v3(&n, classes); break;
  case CIFAR10_WORKSHOP: cifar10_workshop(&n, classes); break;
  case WRN16_10: wrn16_10(&n, classes); break;
  default: *why = "unknown network"; return false;
  }
  if (n.too_small) {
    *why = "the image is too small for the network's convolutions and pools";
    return false;
  }
  if (out->failed) *why = "out of memory";
  return !out->failed;
}
