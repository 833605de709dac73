"""Write a rehearsal scenario's `model:` section (per-layer parameters and FLOPs) from a PyTorch model.

    /usr/bin/python3 tools/torch_export.py MODEL [--input-shape C,H,W | --seq-len S]
                                [--name NAME] [--meta | --cpu] [--json | --preset] [-o FILE]

MODEL is `torchvision:resnet50` (any torchvision.models builder, weights=None),
`transformer:gpt2` (a PRESETS entry of tools/torch_models.py), or `path/to/file.py:Name`
(a class or function there, called with no arguments, that gives an nn.Module).

It runs one sample (batch 1) forward in train() mode and backward once:
  * forward pre/post hooks keep a stack of the running modules; a TorchDispatchMode sees every
    aten op and charges it to the innermost running module: FLOPs of mm, addmm, bmm, baddbmm
    and convolution (2 x multiply-adds, bias adds not counted), "traffic" (numel of the op's
    tensor inputs plus outputs; a lookup such as embedding reads only its rows, not the table)
    and "activations" (numel of its outputs; views and in-place ops allocate nothing: skipped);
  * each module's own parameters (recurse=False; a tied parameter counts once, at its first owner);
  * the order in which each layer's gradients arrive in backward (tensor hooks on parameters).
A layer is a module that owns parameters or was charged FLOPs or traffic.  The layers are
listed in forward order, except that the layers with parameters are permuted so that walking
the list backwards gives the order in which their gradients become ready.

Where it runs: by default on the meta device first (model and input built there: shapes
only, no memory, no arithmetic, so Llama-7B needs no 27 GB and GPT-2 no minutes of CPU: this
Debian torch has a reference BLAS, ~5 GFLOP/s), and on the CPU when the model cannot be built
or run there, or its backward cannot (models up to 1e9 parameters).  --meta: the meta device
only (if backward fails there, the gradient order is taken as reverse forward order, and the
output says so).  --cpu: a real run.  The counts are the same either way (checked for ResNet-50,
VGG-16, Inception-v3, BERT-base and GPT-2).  torch 1.13 lacks meta kernels for a few backward
ops (convolution_backward, _adaptive_avg_pool2d_backward): this adds them, shapes only.

Output: YAML, the `model:` section of a scenario; --preset: the same mapping at the top level,
a model preset's file (presets/model/NAME.yaml); --json: JSON, FLOPs rather than GFLOPs.  A
scenario reads either YAML file as `model: {preset: FILE.yaml}`, and `rehearsal model FILE.yaml`
expands either.
Errors (a model that raises, or calls sys.exit(), while imported, built or run included): one line
on stderr, exit 2.  The check is tools/test_torch_export.py.
"""

import argparse
import contextlib
import importlib.util
import json
import os
import re
import sys
import warnings

AUTO_META_PARAMETERS = 1e9  # above this, never fall back to a CPU run
DEFAULT_SHAPE = (3, 224, 224)
TORCHVISION_SHAPES = {"inception_v3": (3, 299, 299)}
# extra builder arguments: skip the slow scipy-style init (the weights are random anyway)
TORCHVISION_KWARGS = {"inception_v3": {"init_weights": False, "aux_logits": True},
                      "googlenet": {"init_weights": False, "aux_logits": True}}


class ExportError(Exception):
    """A user-facing failure: reported as one line on stderr, exit 2."""


# ----------------------------------------------------------------------------- model loading

def _meta_factory_mode():
    """A TorchFunctionMode that sends tensor factories (torch.empty, zeros, ...) to the meta device."""
    import torch
    from torch.overrides import TorchFunctionMode

    factories = {torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn,
                 torch.randint, torch.arange, torch.linspace, torch.eye, torch.tensor,
                 torch.empty_strided}

    class MetaFactories(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories:
                kwargs["device"] = "meta"
            return func(*args, **kwargs)

    return MetaFactories()


def _import_file(path):
    if not os.path.isfile(path):
        raise ExportError("cannot import %s: no such file" % path)
    name = "torch_export_user_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ExportError("cannot import %s: not a Python file" % path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:  # sys.exit() at import: not a clean exit of the exporter
        raise ExportError("cannot import %s: it exited (sys.exit(%r))" % (path, e.code))
    except Exception as e:  # a user's file may raise anything
        raise ExportError("cannot import %s: %s: %s" % (path, type(e).__name__, _first_line(e)))
    finally:
        sys.path.pop(0)
    return module


def _first_line(e):
    s = str(e).strip().splitlines()
    return s[0] if s else type(e).__name__


class Source:
    """Where a model comes from, and how to build it and its one-sample input."""

    def __init__(self, spec):
        self.spec = spec
        if ":" not in spec:
            raise ExportError("model %r: expected torchvision:NAME, transformer:NAME or FILE.py:NAME"
                              % spec)
        kind, name = spec.rsplit(":", 1)
        if not name:
            raise ExportError("model %r: no name after the colon" % spec)
        self.name = name
        if kind == "torchvision":
            self.kind = "torchvision"
        elif kind == "transformer":
            self.kind = "transformer"
        elif kind.endswith(".py"):
            self.kind = "file"
            self.path = kind
            if not os.path.isfile(kind):
                raise ExportError("cannot import %s: no such file" % kind)
        else:
            raise ExportError("model %r: expected torchvision:NAME, transformer:NAME or FILE.py:NAME"
                              % spec)
        self.sequence = self.kind == "transformer"

    def _builder(self):
        if self.kind == "torchvision":
            import torchvision.models as tvm
            obj = tvm
            for part in self.name.split("."):  # e.g. segmentation.fcn_resnet50
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            if obj is None or not callable(obj) or isinstance(obj, type) or self.name.startswith("_"):
                raise ExportError("unknown model torchvision:%s (not a torchvision.models builder)"
                                  % self.name)
            kwargs = dict(TORCHVISION_KWARGS.get(self.name.split(".")[-1], {}))
            return lambda: obj(weights=None, **kwargs)
        if self.kind == "transformer":
            import torch_models
            if self.name not in torch_models.PRESETS:
                raise ExportError("unknown model transformer:%s (presets: %s)"
                                  % (self.name, ", ".join(sorted(torch_models.PRESETS))))
            cfg = dict(torch_models.PRESETS[self.name])
            if self.seq_len_override:
                cfg["seq_len"] = self.seq_len_override
            self.cfg = torch_models.full_config(cfg)
            return lambda device=None: torch_models.Transformer(cfg, device=device)
        module = _import_file(self.path)
        obj = getattr(module, self.name, None)
        if obj is None or not callable(obj):
            raise ExportError("%s has no class or function %s" % (self.path, self.name))
        return obj

    seq_len_override = None
    _resolved = None

    def resolve(self):
        """Find the builder (and a transformer's config); raises ExportError for unknown models."""
        if self._resolved is None:
            self._resolved = self._builder()
        return self._resolved

    def build(self, meta):
        """The nn.Module, on the meta device or the CPU."""
        import torch
        builder = self.resolve()
        try:
            if self.kind == "transformer":
                model = builder(device="meta" if meta else None)
            elif meta:
                with _meta_factory_mode():
                    model = builder()
            else:
                model = builder()
        except ExportError:
            raise
        except SystemExit as e:
            raise ExportError("cannot build %s: the model's constructor exited (sys.exit(%r))"
                              % (self.spec, e.code))
        except Exception as e:
            raise ExportError("cannot build %s%s: %s: %s" % (self.spec, " on the meta device" if meta
                                                             else "", type(e).__name__, _first_line(e)))
        if not isinstance(model, torch.nn.Module):
            raise ExportError("%s did not give a torch.nn.Module (got %s)"
                              % (self.spec, type(model).__name__))
        return model

    def default_shape(self):
        return TORCHVISION_SHAPES.get(self.name, DEFAULT_SHAPE) if self.kind == "torchvision" \
            else DEFAULT_SHAPE


# ----------------------------------------------------------------------------- measuring

_META_KERNELS = None


def _register_meta_backward_kernels():
    """Meta kernels for backward ops that torch 1.13 lacks (gradients shaped like the inputs)."""
    global _META_KERNELS
    if _META_KERNELS is not None:
        return
    import torch
    lib = torch.library.Library("aten", "IMPL", "Meta")
    has = torch._C._dispatch_has_kernel_for_dispatch_key

    def conv_bwd(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                 output_padding, groups, output_mask):
        return (input.new_empty(input.shape) if output_mask[0] else None,
                weight.new_empty(weight.shape) if output_mask[1] else None,
                grad_output.new_empty((weight.shape[1] * groups if transposed else weight.shape[0],))
                if output_mask[2] else None)

    def like_input(grad_output, input):
        return input.new_empty(input.shape)

    for op, fn in (("convolution_backward", conv_bwd),
                   ("_adaptive_avg_pool2d_backward", like_input),
                   ("_adaptive_avg_pool3d_backward", like_input)):
        if not has("aten::" + op, "Meta"):
            try:
                lib.impl(op, fn)
            except Exception:
                pass
    _META_KERNELS = lib


def _shape_prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _op_flops(name, args, out):
    """FLOPs (2 x multiply-adds) of a matmul or convolution aten op; 0 for anything else."""
    if name in ("mm", "addmm"):
        a, b = (args[0], args[1]) if name == "mm" else (args[1], args[2])
        return 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if name in ("bmm", "baddbmm"):
        a, b = (args[0], args[1]) if name == "bmm" else (args[1], args[2])
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if name == "addbmm":
        a, b = args[1], args[2]
        return 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if name in ("mv", "addmv"):
        a = args[0] if name == "mv" else args[1]
        return 2 * a.shape[0] * a.shape[1]
    if name == "dot":
        return 2 * args[0].shape[0]
    if name in ("convolution", "_convolution"):
        x, w = args[0], args[1]
        transposed = bool(args[6]) if len(args) > 6 else False
        per_position = _shape_prod(w.shape[1:])  # (Cin/groups) kh kw, or (Cout/groups) kh kw
        return 2 * per_position * (x.numel() if transposed else out.numel())
    return 0


_NO_TRAFFIC = {"detach", "alias", "lift_fresh", "_unsafe_view", "empty", "empty_like",
               "empty_strided", "new_empty", "new_empty_strided", "set_", "resize_"}


# lookups: charged the indices, the rows read and the rows written (not the whole table)
_GATHERS = {"embedding", "index_select", "gather", "index", "take"}


def _is_view(func):
    """True when every output of the op aliases an input without writing it."""
    rets = func._schema.returns
    if not rets:
        return False
    for r in rets:
        info = r.alias_info
        if info is None or info.is_write:
            return False
    return True


def _is_inplace(func):
    return any(r.alias_info is not None and r.alias_info.is_write for r in func._schema.returns)


def _tensors(obj, out):
    import torch
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors(x, out)
    return out


class LayerStats:
    __slots__ = ("module", "name", "parameters", "flops", "traffic", "activations", "first_op",
                 "first_call", "params")

    def __init__(self, module, name):
        self.module, self.name = module, name
        self.parameters = self.flops = self.traffic = self.activations = 0
        self.first_op = self.first_call = None
        self.params = []


@contextlib.contextmanager
def _batch_of_one_batchnorm():
    """Let BatchNorm train on one value per channel (Inception's aux head at batch 1)."""
    import torch.nn.functional as F
    saved = F._verify_batch_size
    F._verify_batch_size = lambda size: None
    try:
        yield
    finally:
        F._verify_batch_size = saved


def _charge(into, work):
    """Adds `work`'s FLOPs, traffic and activations to `into` (which ran then if not before)."""
    into.flops += work.flops
    into.traffic += work.traffic
    into.activations += work.activations
    if into.first_op is None or work.first_op < into.first_op:
        into.first_op = work.first_op


def measure(model, inputs, meta):
    """Run one forward (counting) and one backward (gradient order) of `model` on `inputs`.

    Returns (layers in forward order as LayerStats with .params, grad_order: list of LayerStats
    in the order their first gradient arrived, or None when backward could not run, notes)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    notes = []
    names = {}
    for n, m in model.named_modules():
        names.setdefault(m, n)
    stats = {}
    root_name = "model"
    if any(n == root_name for n in names.values()):
        root_name = "model_top"

    def stat(m):
        s = stats.get(m)
        if s is None:
            s = stats[m] = LayerStats(m, names.get(m) or root_name)
        return s

    # parameters: each owned by the first module (named_modules order) that holds it
    owner = {}
    for m, n in names.items():
        for p in m.parameters(recurse=False):
            if p in owner:
                continue
            owner[p] = m
            s = stat(m)
            s.parameters += p.numel()
            s.params.append(p)

    # a parameter a parent's forward uses itself (MultiheadAttention passes out_proj.weight to
    # F.multi_head_attention_forward, never calling out_proj): its owner ran when it was used
    param_stat = {id(p): stats[m] for p, m in owner.items()}
    stack = [model]
    counter = [0]
    # the root's own ops (a residual add around its children) when it owns no parameters: a layer
    # of no parameters named after no module; they go to the module that ran last (or next)
    root_bare = stat(model).parameters == 0
    last, pending = [None], LayerStats(model, root_name)

    def pre_hook(m, inp):
        stack.append(m)
        s = stat(m)
        if s.first_call is None:
            counter[0] += 1
            s.first_call = counter[0]
        if m is not model and pending.first_op is not None:
            _charge(s, pending)
            pending.__init__(model, root_name)

    def post_hook(m, inp, out):
        if stack and stack[-1] is m:
            stack.pop()
        if m is not model:
            last[0] = m

    class Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func.overloadpacket.__name__
            if (meta and name == "native_batch_norm" and len(args) > 5 and args[5]
                    and args[0].numel() <= args[0].shape[1]):
                # torch 1.13's meta batch norm divides by n - 1 = 0 at one value per channel
                x = args[0]
                out = (x.new_empty(x.shape), x.new_empty((x.shape[1],)), x.new_empty((x.shape[1],)))
            else:
                out = func(*args, **kwargs)
            if _is_view(func) or name in _NO_TRAFFIC:
                return out
            ins = _tensors(args, [])
            _tensors(kwargs, ins)
            outs = _tensors(out, [])
            s = stat(stack[-1])
            if root_bare and stack[-1] is model:
                s = stat(last[0]) if last[0] is not None else pending
            counter[0] += 1
            for t in ins:
                used = param_stat.get(id(t))
                if used is not None and used.first_op is None and used.first_call is None:
                    used.first_op = counter[0]
            if s.first_op is None:
                s.first_op = counter[0]
            s.flops += _op_flops(name, args, out if isinstance(out, torch.Tensor) else None)
            if name in _GATHERS and isinstance(out, torch.Tensor):
                # a lookup reads the rows it gathers, not the whole table
                idx = [t for t in ins[1:] if not t.is_floating_point()]
                s.traffic += sum(t.numel() for t in idx) + 2 * out.numel()
            else:
                s.traffic += sum(t.numel() for t in ins) + sum(t.numel() for t in outs)
            if not _is_inplace(func):
                s.activations += sum(t.numel() for t in outs)
            return out

    handles = []
    for m in names:
        handles.append(m.register_forward_pre_hook(pre_hook))
        handles.append(m.register_forward_hook(post_hook))
    model.train()
    try:
        with _batch_of_one_batchnorm(), Counter():
            output = model(*inputs)
    finally:
        for h in handles:
            h.remove()

    if pending.first_op is not None:  # no module ran after the root's own ops: they stay its
        _charge(stat(model), pending)
    # layers in forward order: by the first op charged to them, else by their first call
    layers = [s for s in stats.values()
              if s.parameters or s.flops or s.traffic]
    never = [s for s in layers if s.first_op is None and s.first_call is None]
    for s in never:
        notes.append("%s never ran in forward (listed first; it gets no gradient)" % s.name)

    def key(s):
        if s.first_op is not None:
            return s.first_op
        if s.first_call is not None:
            return s.first_call
        return 0
    layers.sort(key=key)

    # backward: the order in which each layer's first gradient arrives
    grad_order = None
    outs = [t for t in _tensors(output, []) if t.is_floating_point() and t.requires_grad]
    if not outs:
        notes.append("no output needs a gradient: gradient order taken as reverse forward order")
        return layers, grad_order, notes, output
    arrived = []
    seen = set()
    grad_handles = []
    for p, m in owner.items():
        if not p.requires_grad:
            continue
        s = stats[m]

        def hook(g, s=s):
            if s not in seen:
                seen.add(s)
                arrived.append(s)
        grad_handles.append(p.register_hook(hook))
    if meta:
        _register_meta_backward_kernels()
    try:
        loss = outs[0].sum()
        for t in outs[1:]:
            loss = loss + t.sum()
        loss.backward()
        grad_order = arrived
    except Exception as e:
        notes.append("backward failed%s (%s: %s): gradient order taken as reverse forward order"
                     % (" on the meta device" if meta else "", type(e).__name__, _first_line(e)))
    finally:
        for h in grad_handles:
            h.remove()
    return layers, grad_order, notes, output


def order_for_backward(layers, grad_order, notes):
    """Permute the layers with parameters so that the list read backwards is the gradient order."""
    if grad_order is None:
        return layers
    with_grad = set(grad_order)
    slots = [i for i, s in enumerate(layers) if s in with_grad]
    forward = [layers[i] for i in slots]
    wanted = list(reversed(grad_order))
    missing = [s.name for s in layers if s.parameters and s not in with_grad]
    if missing:
        notes.append("no gradient reached %s (left in forward order)" % ", ".join(missing[:8])
                     + (" and %d more" % (len(missing) - 8) if len(missing) > 8 else ""))
    if wanted == forward:
        return layers
    moved = [f.name for f, w in zip(forward, wanted) if f is not w]
    notes.append("backward's gradient order differs from reverse forward order: layers with "
                 "parameters reordered (%d moved: %s)" % (len(moved), ", ".join(moved[:6])
                                                          + (", ..." if len(moved) > 6 else "")))
    out = list(layers)
    for i, s in zip(slots, wanted):
        out[i] = s
    return out


# ----------------------------------------------------------------------------- export

def _run_once(src, meta, input_shape, seq_len):
    """Build and measure on one device; returns (layers, grad_order, notes, model, shape_text, s)."""
    import torch
    model = src.build(meta)
    device = "meta" if meta else "cpu"
    torch.manual_seed(0)
    if src.sequence:
        s = seq_len if seq_len is not None else src.cfg["seq_len"]
        inputs = (torch.zeros((1, s), dtype=torch.long, device=device),)
        shape_text = "%d tokens" % s
    else:
        shape = tuple(input_shape) if input_shape is not None else src.default_shape()
        inputs = (torch.randn((1,) + shape, device=device),)
        shape_text = "input " + "x".join(str(d) for d in shape)
        s = 0
    try:
        layers, grad_order, notes, _ = measure(model, inputs, meta)
    except ExportError:
        raise
    except SystemExit as e:  # not an answer: no file would be written and the exit code be 0
        raise ExportError("%s: the model's forward exited (sys.exit(%r)) on one sample of %s"
                          % (src.spec, e.code, shape_text))
    except Exception as e:
        raise ExportError("%s fails on one sample of %s%s: %s: %s"
                          % (src.spec, shape_text, " on the meta device" if meta else "",
                             type(e).__name__, _first_line(e)))
    return layers, grad_order, notes, model, shape_text, s


def export(spec, input_shape=None, seq_len=None, name=None, meta=None, details=None):
    """Measure a model; returns the JSON document (a dict).

    meta: True (meta device only), False (a real run on the CPU), or None: the meta device
    first (shapes only: fast, no memory), and the CPU when the model cannot be built or run
    there, or its backward cannot run there, and it has at most AUTO_META_PARAMETERS parameters.
    details: an optional dict that receives extra facts (model, grad_order, notes, meta, ...)."""
    if seq_len is not None and seq_len < 1:
        raise ExportError("--seq-len must be a positive number of tokens, got %d" % seq_len)
    if input_shape is not None and (not input_shape or any(d < 1 for d in input_shape)):
        raise ExportError("--input-shape must be positive sizes, like 3,224,224")
    src = Source(spec)
    if src.sequence and input_shape is not None:
        raise ExportError("%s takes token ids: give --seq-len, not --input-shape" % spec)
    if src.kind == "torchvision" and seq_len is not None:
        raise ExportError("%s takes images: give --input-shape, not --seq-len" % spec)
    if src.kind == "file" and seq_len is not None:
        src.sequence = True
    src.seq_len_override = seq_len
    src.resolve()
    if src.kind == "transformer" and src.cfg["positions"] and src.cfg["seq_len"] > src.cfg["positions"]:
        raise ExportError("--seq-len %d exceeds %s's %d learned positions"
                          % (src.cfg["seq_len"], spec, src.cfg["positions"]))

    notes = []
    on_meta = meta is not False
    try:
        layers, grad_order, more, model, shape_text, s = _run_once(src, on_meta, input_shape, seq_len)
        if on_meta and meta is None and grad_order is None and \
                _count(model) <= AUTO_META_PARAMETERS:
            notes.append("backward could not run on the meta device: measured on the CPU")
            on_meta = False
    except ExportError as e:
        if not on_meta or meta is True:
            raise
        why = str(e)
        notes.append("could not measure on the meta device (%s): measured on the CPU"
                     % (why if len(why) < 200 else why[:197] + "..."))
        on_meta = False
    if not on_meta:
        layers, grad_order, more, model, shape_text, s = _run_once(src, False, input_shape, seq_len)
    notes += more
    layers = order_for_backward(layers, grad_order, notes)
    if on_meta:
        notes.insert(0, "measured on the meta device: shapes only, no arithmetic"
                     + ("; backward ran there too" if grad_order is not None else ""))
    doc = {
        "name": name or src.name.split(".")[-1],
        "source": spec,
        "parameters": sum(l.parameters for l in layers),
        "forward_flops_per_sample": sum(l.flops for l in layers),
        "tokens_per_sample": s if src.sequence else 0,
        "layers": [{"name": l.name, "parameters": l.parameters,
                    "forward_flops_per_sample": l.flops, "traffic_per_sample": l.traffic,
                    "activations_per_sample": l.activations} for l in layers],
    }
    if details is not None:
        details.update(model=model, grad_order=[l.name for l in grad_order] if grad_order else None,
                       notes=notes, meta=on_meta, shape_text=shape_text,
                       module_parameters=_count(model))
    return doc


def _count(model):
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/]*$")


def _yaml_str(s):
    if _PLAIN.match(s) and s.lower() not in ("true", "false", "null", "yes", "no", "on", "off", "~"):
        return s
    return json.dumps(s)


def _gflops(flops):
    """FLOPs as GFLOPs, %.10g (exact to 5e-10 relative), always a float to a YAML reader."""
    g = "%.10g" % (flops / 1e9)
    if "e" in g and "." not in g:
        m, e = g.split("e")
        g = m + ".0e" + e
    return g


def to_yaml(doc, shape_text, notes, preset=False):
    """The `model:` section of a scenario; preset: the same mapping at the top level, as a
    model preset's file (presets/model/NAME.yaml) holds it."""
    lines = ["# exported by tools/torch_export.py from %s, %s, batch 1 (train mode)"
             % (doc["source"], shape_text),
             "# parameters %s; forward %.6g GFLOP per sample" % (format(doc["parameters"], ","),
                                                                doc["forward_flops_per_sample"] / 1e9)]
    lines += ["# note: " + n for n in notes]
    ind = "" if preset else "  "
    if not preset:
        lines.append("model:")
    lines.append(ind + "name: " + _yaml_str(doc["name"]))
    if doc["tokens_per_sample"]:
        lines.append(ind + "tokens_per_sample: %d" % doc["tokens_per_sample"])
    lines.append(ind + "layers:")
    for l in doc["layers"]:
        lines.append(ind + "  - {name: %s, parameters: %d, forward_gflops_per_sample: %s, "
                     "traffic_per_sample: %d, activations_per_sample: %d}"
                     % (_yaml_str(l["name"]), l["parameters"],
                        _gflops(l["forward_flops_per_sample"]),
                        l["traffic_per_sample"], l["activations_per_sample"]))
    return "\n".join(lines) + "\n"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("torch_export.py: %s\n" % message)
        sys.exit(2)


def _shape(text):
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("--input-shape wants sizes like 3,224,224, got %r" % text)
    return dims


def main(argv=None):
    p = _Parser(description="Write a scenario's model: section from a PyTorch model.")
    p.add_argument("model", help="torchvision:NAME, transformer:NAME, or FILE.py:NAME")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--input-shape", type=_shape, help="one sample's shape, C,H,W (default 3,224,224)")
    g.add_argument("--seq-len", type=int, help="tokens per sequence (transformers)")
    p.add_argument("--name", help="the model's name in the output")
    d = p.add_mutually_exclusive_group()
    d.add_argument("--meta", dest="meta", action="store_const", const=True, default=None,
                   help="measure on the meta device only (default: meta first, else the CPU)")
    d.add_argument("--cpu", dest="meta", action="store_const", const=False,
                   help="run the model for real on the CPU (slow for big models)")
    f = p.add_mutually_exclusive_group()
    f.add_argument("--json", action="store_true", help="write JSON (FLOPs, not GFLOPs)")
    f.add_argument("--preset", action="store_true",
                   help="write a model preset's file (the mapping at the top level, no model:)")
    p.add_argument("-o", "--output", help="write here instead of stdout")
    a = p.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    warnings.simplefilter("ignore")
    try:
        try:
            import torch  # noqa: F401
            if a.model.startswith("torchvision:"):
                import torchvision  # noqa: F401
        except ImportError as e:
            raise ExportError("cannot import %s (use Debian's /usr/bin/python3)" % e.name)
        details = {}
        doc = export(a.model, input_shape=a.input_shape, seq_len=a.seq_len, name=a.name,
                     meta=a.meta, details=details)
        text = (json.dumps(doc, indent=1) + "\n") if a.json else \
            to_yaml(doc, details["shape_text"], details["notes"], preset=a.preset)
        if a.output:
            with open(a.output, "w") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
    except ExportError as e:
        sys.stderr.write("torch_export.py: %s\n" % e)
        return 2
    except OSError as e:
        sys.stderr.write("torch_export.py: %s\n" % e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
