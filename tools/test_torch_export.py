"""Check tools/torch_export.py (and tools/torch_models.py) against published figures.

    /usr/bin/python3 tools/test_torch_export.py        # plain unittest; about 20-30 s on 2 cores

For ResNet-50, VGG-16, Inception-v3 (torchvision), BERT-base, GPT-2 and Llama-2-7B (torch_models,
on the meta device) it checks that the export's parameter count equals the published figure and
the module's own sum(p.numel()); that its forward FLOPs agree within 1% with a derivation written
here (torchvision's published GFLOPS for the CNNs, which are multiply-adds; for transformers the
weight matmuls written out from the config plus the attention core, and Megatron's closed form for
GPT-2); that ResNet-50's gradients become ready from fc down to conv1 and the layer list read
backwards gives that order; that the YAML and JSON outputs have the documented shape and agree;
that bad input exits 2 with a message; and, when REHEARSAL names the built `rehearsal` program,
that `$REHEARSAL model --json presets/model/<name>.yaml` (else `... model --json <name>`) gives the
same parameters and FLOPs within 1%, and that it reads the exporter's own --preset file (each part
skipped with a printed note where the command fails).

Exit 77 (skipped) when torch or torchvision cannot be imported: use Debian's /usr/bin/python3.
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXPORT = os.path.join(HERE, "torch_export.py")

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
except ImportError as e:
    sys.stderr.write("SKIP: test_torch_export.py needs torch and torchvision (%s); "
                     "run it with Debian's /usr/bin/python3\n" % e)
    sys.exit(77)

sys.path.insert(0, HERE)
import torch_export  # noqa: E402
import torch_models  # noqa: E402

# --------------------------------------------------------------------------- published figures

PUBLISHED_PARAMETERS = {
    "torchvision:resnet50": 25557032,
    "torchvision:vgg16": 138357544,
    "torchvision:inception_v3": 27161264,   # with its aux classifier (torchvision's num_params)
    "transformer:bert-base": 110106428,     # HF BertForPreTraining, bert-base-uncased
    "transformer:gpt2": 124439808,          # HF GPT2LMHeadModel (tied head)
    "transformer:llama2-7b": 6738415616,    # meta-llama/Llama-2-7b-hf
}

# torchvision's weight tables (docs, torchvision >= 0.15: the "GFLOPS" column, ImageNet size,
# counted as multiply-adds of convolutions and matmuls, eval mode).  FLOPs = 2 x these.
TORCHVISION_GMACS = {"torchvision:resnet50": 4.09, "torchvision:vgg16": 15.47,
                     "torchvision:inception_v3": 5.71}

# the configs, written out again here (not read from torch_models) for the derivation
CONFIGS = {
    "transformer:gpt2": dict(L=12, h=768, a=12, kv=12, f=3072, act="gelu", V=50257, s=1024,
                             encoder=False),
    "transformer:bert-base": dict(L=12, h=768, a=12, kv=12, f=3072, act="gelu", V=30522, s=128,
                                  encoder=True),
    "transformer:llama2-7b": dict(L=32, h=4096, a=32, kv=32, f=11008, act="swiglu", V=32000,
                                  s=4096, encoder=False),
    "transformer:llama3-8b": dict(L=32, h=4096, a=32, kv=8, f=14336, act="swiglu", V=128256,
                                  s=8192, encoder=False),
}


def transformer_forward_flops(c):
    """Forward FLOPs of one sequence: 2 x (weights of every matmul) x (tokens it runs on)
    + the attention core: Q K^T and A V are s x s x h multiply-adds each per layer."""
    L, h, a, kv, f, V, s = c["L"], c["h"], c["a"], c["kv"], c["f"], c["V"], c["s"]
    kv_dim = kv * h // a
    attention = h * h + h * kv_dim + h * kv_dim + h * h      # q, k, v, o
    mlp = 3 * h * f if c["act"] == "swiglu" else 2 * h * f    # gate, up, down / fc, proj
    per_token = L * (attention + mlp) + V * h                 # + the LM / MLM decoder head
    flops = 2 * per_token * s + 4 * L * s * s * h
    if c["encoder"]:
        flops += 2 * h * h * s          # MLM transform, on every token
        flops += 2 * (h * h + h * 2)    # pooler and NSP, on the first token
    return flops


def megatron_forward_flops(s, L, h, V):
    """Narayanan et al. (SC'21): 72 B s L h^2 (1 + s/(6h) + V/(12hL)) per step = 3 x forward."""
    return 24 * s * L * h * h * (1 + s / (6.0 * h)) + 2 * s * h * V


# --------------------------------------------------------------------------- helpers

_EXPORTS = {}


def exported(spec, **kw):
    """(doc, details) of an in-process export, cached."""
    key = (spec, tuple(sorted(kw.items())))
    if key not in _EXPORTS:
        details = {}
        doc = torch_export.export(spec, details=details, **kw)
        _EXPORTS[key] = (doc, details)
    return _EXPORTS[key]


def run_cli(*args):
    return subprocess.run([sys.executable, EXPORT] + list(args), cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def _scalar(text):
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def parse_model_yaml(text):
    """A tiny reader for the exporter's YAML: model: {name, tokens_per_sample?, layers: [{...}]}."""
    model, layers, state = {}, [], "top"
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if state == "top":
            if line != "model:":
                raise ValueError("line %d: expected 'model:', got %r" % (n, line))
            state = "model"
        elif line.startswith("    - {") and line.endswith("}") and state == "layers":
            layer = {}
            for item in re.findall(r'(\w+): ("(?:[^"\\]|\\.)*"|[^,{}]+)', line[7:-1]):
                layer[item[0]] = _scalar(item[1])
            layers.append(layer)
        elif line == "  layers:":
            state = "layers"
        elif re.fullmatch(r"  \w+: .+", line) and state == "model":
            k, v = line.strip().split(": ", 1)
            model[k] = _scalar(v)
        else:
            raise ValueError("line %d: unexpected %r" % (n, line))
    model["layers"] = layers
    return model


LAYER_KEYS = {"name", "parameters", "forward_flops_per_sample", "traffic_per_sample",
              "activations_per_sample"}
YAML_LAYER_KEYS = {"name", "parameters", "forward_gflops_per_sample", "traffic_per_sample",
                   "activations_per_sample"}


# --------------------------------------------------------------------------- tests

# A user's file for the cases below: a module of nn.MultiheadAttention with a residual add in the
# wrapper's own forward, and modules whose constructor or forward calls sys.exit(0).
USER_MODELS = """
import sys
import torch.nn as nn

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        return self.mha(x, x, x)[0] + x

class ExitInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        sys.exit(0)

class ExitInConstructor(nn.Module):
    def __init__(self):
        super().__init__()
        sys.exit(0)
"""


def user_models():
    """The path of USER_MODELS written to a file (removed at exit)."""
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "test_torch_export_user_%d.py" % os.getpid())
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(USER_MODELS)
        import atexit
        atexit.register(os.remove, path)
    return path


class PublishedFigures(unittest.TestCase):
    def test_parameters(self):
        for spec, published in PUBLISHED_PARAMETERS.items():
            with self.subTest(spec):
                doc, details = exported(spec)
                module = details["model"]
                self.assertEqual(doc["parameters"], published)
                self.assertEqual(sum(p.numel() for p in module.parameters()), published)
                self.assertEqual(sum(l["parameters"] for l in doc["layers"]), published)

    def test_llama_on_meta(self):
        doc, details = exported("transformer:llama2-7b")
        self.assertTrue(details["meta"])
        self.assertEqual(next(details["model"].parameters()).device.type, "meta")

    def test_cnn_flops_vs_torchvision(self):
        for spec, gmacs in TORCHVISION_GMACS.items():
            with self.subTest(spec):
                doc, _ = exported(spec)
                want = 2 * gmacs * 1e9
                got = doc["forward_flops_per_sample"]
                self.assertLess(abs(got - want) / want, 0.01, "%s: %.4g vs %.4g" % (spec, got, want))

    def test_transformer_flops_vs_derivation(self):
        for spec in ("transformer:gpt2", "transformer:bert-base", "transformer:llama2-7b",
                     "transformer:llama3-8b"):
            with self.subTest(spec):
                doc, _ = exported(spec)
                want = transformer_forward_flops(CONFIGS[spec])
                got = doc["forward_flops_per_sample"]
                self.assertLess(abs(got - want) / want, 0.01, "%s: %d vs %d" % (spec, got, want))
                self.assertEqual(doc["tokens_per_sample"], CONFIGS[spec]["s"])

    def test_gpt2_megatron_closed_form(self):
        c = CONFIGS["transformer:gpt2"]
        closed = megatron_forward_flops(c["s"], c["L"], c["h"], c["V"])
        derived = transformer_forward_flops(c)
        self.assertLess(abs(closed - derived) / closed, 0.01)
        doc, _ = exported("transformer:gpt2")
        self.assertLess(abs(doc["forward_flops_per_sample"] - closed) / closed, 0.01)

    def test_presets_match_configs(self):
        names = {"L": "layers", "h": "hidden", "a": "heads", "kv": "kv_heads", "f": "ffn",
                 "act": "activation", "V": "vocab", "s": "seq_len"}
        for spec, c in CONFIGS.items():
            cfg = torch_models.full_config(torch_models.PRESETS[spec.split(":")[1]])
            for k, v in c.items():
                if k in names:
                    self.assertEqual(cfg[names[k]], v, "%s %s" % (spec, k))
            self.assertEqual(cfg["decoder"], not c["encoder"])

    def test_other_transformer_parameters(self):
        # Llama-3-8B: 8,030,261,248.  BERT-large as BertForPreTraining (pooler and NSP head,
        # like bert-base above): 336,226,108; the often-quoted 335,174,458 is BertForMaskedLM,
        # which has neither (336,226,108 - (1024*1024 + 1024) - (1024*2 + 2)).
        for name, want in (("llama3-8b", 8030261248), ("bert-large", 336226108)):
            m = torch_models.build(name, device="meta")
            self.assertEqual(sum(p.numel() for p in m.parameters()), want, name)
        self.assertEqual(336226108 - (1024 * 1024 + 1024) - (1024 * 2 + 2), 335174458)


class GradientOrder(unittest.TestCase):
    def test_resnet50_fc_first_conv1_last(self):
        doc, details = exported("torchvision:resnet50")
        order = details["grad_order"]
        self.assertIsNotNone(order, "backward did not run")
        self.assertEqual(order[0], "fc")
        self.assertEqual(order[-1], "conv1")
        with_params = [l["name"] for l in doc["layers"] if l["parameters"]]
        self.assertEqual(with_params[0], "conv1")
        self.assertEqual(with_params[-1], "fc")

    def test_list_read_backwards_is_gradient_order(self):
        for spec in PUBLISHED_PARAMETERS:
            with self.subTest(spec):
                doc, details = exported(spec)
                order = details["grad_order"]
                self.assertIsNotNone(order, "%s: backward did not run" % spec)
                got = [l["name"] for l in reversed(doc["layers"])
                       if l["parameters"] and l["name"] in set(order)]
                self.assertEqual(got, order)

    def test_meta_equals_cpu(self):
        # the default measures on the meta device; a real CPU run must give the same numbers
        meta_doc, _ = exported("torchvision:resnet50")
        cpu_doc, cpu_details = exported("torchvision:resnet50", meta=False)
        self.assertFalse(cpu_details["meta"])
        self.assertEqual(meta_doc["layers"], cpu_doc["layers"])


class Outputs(unittest.TestCase):
    def test_yaml_and_json(self):
        y = run_cli("torchvision:resnet50")
        self.assertEqual(y.returncode, 0, y.stderr)
        j = run_cli("torchvision:resnet50", "--json")
        self.assertEqual(j.returncode, 0, j.stderr)
        self.assertTrue(y.stdout.startswith("# exported by tools/torch_export.py from "
                                            "torchvision:resnet50, input 3x224x224, batch 1"))
        model = parse_model_yaml(y.stdout)
        doc = json.loads(j.stdout)
        self.assertEqual(set(doc), {"name", "source", "parameters", "forward_flops_per_sample",
                                    "tokens_per_sample", "layers"})
        self.assertEqual(model["name"], "resnet50")
        self.assertNotIn("tokens_per_sample", model)
        self.assertEqual(len(model["layers"]), len(doc["layers"]))
        for ly, lj in zip(model["layers"], doc["layers"]):
            self.assertEqual(set(ly), YAML_LAYER_KEYS)
            self.assertEqual(set(lj), LAYER_KEYS)
            self.assertEqual(ly["name"], lj["name"])
            for k in ("parameters", "traffic_per_sample", "activations_per_sample"):
                self.assertIsInstance(ly[k], int)
                self.assertEqual(ly[k], lj[k])
            f = lj["forward_flops_per_sample"]
            self.assertLessEqual(abs(ly["forward_gflops_per_sample"] * 1e9 - f), 1e-9 * f + 1e-3)
        self.assertEqual(doc["layers"][0], {"name": "conv1", "parameters": 9408,
                                            "forward_flops_per_sample": 236027904,
                                            "traffic_per_sample": 3 * 224 * 224 + 9408 + 802816,
                                            "activations_per_sample": 64 * 112 * 112})
        self.assertEqual(sum(l["parameters"] for l in doc["layers"]), doc["parameters"])
        self.assertEqual(sum(l["forward_flops_per_sample"] for l in doc["layers"]),
                         doc["forward_flops_per_sample"])
        try:
            import yaml
        except ImportError:
            return
        self.assertEqual(yaml.safe_load(y.stdout)["model"], model)

    def test_sequence_yaml(self):
        out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "test_torch_export_%d.yaml" % os.getpid())
        try:
            r = run_cli("transformer:gpt2", "--name", "gpt2-small", "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                model = parse_model_yaml(f.read())
        finally:
            if os.path.exists(out):
                os.remove(out)
        doc, _ = exported("transformer:gpt2")
        self.assertEqual(model["name"], "gpt2-small")
        self.assertEqual(model["tokens_per_sample"], 1024)
        self.assertEqual([l["name"] for l in model["layers"]], [l["name"] for l in doc["layers"]])
        self.assertEqual(sum(l["parameters"] for l in model["layers"]), 124439808)

    def test_preset_form(self):
        doc, details = exported("transformer:gpt2")
        scenario = torch_export.to_yaml(doc, details["shape_text"], details["notes"])
        preset = torch_export.to_yaml(doc, details["shape_text"], details["notes"], preset=True)
        want = [l[2:] if l.startswith("  ") else l for l in scenario.splitlines() if l != "model:"]
        self.assertEqual(preset.splitlines(), want)

    def test_forward_or_constructor_that_exits(self):
        # sys.exit(0) in the model's code is no export: exit 2 with one line, nothing written
        for name, where in (("ExitInForward", "forward"), ("ExitInConstructor", "constructor")):
            with self.subTest(name):
                out = os.path.join(os.environ.get("TMPDIR", "/tmp"), "test_torch_export_exit_%d.yaml"
                                   % os.getpid())
                r = run_cli(user_models() + ":" + name, "--input-shape", "4", "-o", out)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertFalse(os.path.exists(out))
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn("the model's %s exited" % where, lines[0])

    def test_multihead_attention(self):
        # MultiheadAttention hands out_proj.weight to F.multi_head_attention_forward without
        # calling out_proj: its 16 x 16 + 16 parameters still get their gradient, so no note says
        # otherwise; the wrapper's own residual add is no layer of its own (it owns no parameters)
        doc, details = exported(user_models() + ":Attention", input_shape=(8, 16))
        names = [l["name"] for l in doc["layers"]]
        self.assertEqual(sorted(names), ["mha", "mha.out_proj"])
        self.assertEqual(doc["parameters"], (3 * 16 * 16 + 3 * 16) + (16 * 16 + 16))
        self.assertFalse([n for n in details["notes"] if "never ran" in n], details["notes"])
        # all the FLOPs: the q, k, v and out projections (2 x 8 x 16 x 16 each) and the two
        # attention matmuls of 2 heads (2 x 2 x 8 x 8 x 8 each)
        self.assertEqual(doc["forward_flops_per_sample"], 4 * 2 * 8 * 16 * 16 + 2 * 2 * 2 * 8 * 8 * 8)

    def test_bad_input(self):
        for args, words in ((["torchvision:nosuchmodel"], "nosuchmodel"),
                            (["no/such/file.py:Net"], "no/such/file.py"),
                            (["transformer:gpt2", "--seq-len", "0"], "--seq-len")):
            with self.subTest(args):
                r = run_cli(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stdout, "")
                lines = r.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, r.stderr)
                self.assertIn(words, lines[0])


class Rehearsal(unittest.TestCase):
    """What `rehearsal model --json` reads (when REHEARSAL names the built program)."""

    PRESET_NAMES = {"torchvision:resnet50": ["resnet50"], "torchvision:vgg16": ["vgg16"],
                    "torchvision:inception_v3": ["inception_v3", "inception-v3"],
                    "transformer:bert-base": ["bert-base"], "transformer:gpt2": ["gpt2", "gpt2-small"],
                    "transformer:llama2-7b": ["llama2-7b", "llama-2-7b"]}

    def rehearsal_model(self, program, arg):
        """(document, None) or (None, why) of `program model --json arg`."""
        try:
            r = subprocess.run([program, "model", "--json", arg], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as e:
            return None, str(e)
        if r.returncode != 0:
            return None, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[0]
        try:
            return json.loads(r.stdout), None
        except ValueError:
            return None, "not JSON"

    def test_presets(self):
        program = os.environ.get("REHEARSAL")
        if not program:
            print("\nnote: REHEARSAL is not set: presets/model/ not compared")
            return
        for spec, names in self.PRESET_NAMES.items():
            with self.subTest(spec):
                got, why = None, None
                # presets/model/NAME.yaml, else the NAME form (a preset rehearsal knows by name)
                for arg in [os.path.join("presets", "model", n + ".yaml") for n in names] + names:
                    if arg.endswith(".yaml") and not os.path.exists(os.path.join(ROOT, arg)):
                        continue
                    got, why = self.rehearsal_model(program, arg)
                    if got is not None:
                        break
                if got is None:
                    self.fail("%s model --json presets/model/%s.yaml failed (%s)"
                              % (program, names[0], why or "no such file"))
                doc, _ = exported(spec)
                self.assertEqual(got["parameters"], doc["parameters"], "%s (%s)" % (spec, arg))
                want = doc["forward_flops_per_sample"]
                self.assertLess(abs(got["forward_flops_per_sample"] - want) / want, 0.01,
                                "%s (%s)" % (spec, arg))

    def test_reads_the_export(self):
        program = os.environ.get("REHEARSAL")
        if not program:
            return
        doc, details = exported("transformer:gpt2")
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "test_torch_export_%d.yaml" % os.getpid())
        try:
            with open(path, "w") as f:
                f.write(torch_export.to_yaml(doc, details["shape_text"], details["notes"], preset=True))
            got, why = self.rehearsal_model(program, path)
        finally:
            os.remove(path)
        if got is None:
            self.fail("%s model --json on the export's --preset file failed (%s)" % (program, why))
        self.assertEqual(got["parameters"], doc["parameters"])
        self.assertEqual(got["tokens_per_sample"], 1024)
        self.assertEqual(len(got["layers"]), len(doc["layers"]))
        want = doc["forward_flops_per_sample"]
        self.assertLess(abs(got["forward_flops_per_sample"] - want) / want, 1e-8)

    def test_default_output_as_the_docs_use_it(self):
        # docs/models.md: `torch_export.py MODEL -o FILE.yaml`, then `model: {preset: FILE.yaml}`
        # in a scenario, or `rehearsal model FILE.yaml`
        program = os.environ.get("REHEARSAL")
        if not program:
            return
        tmp = os.environ.get("TMPDIR", "/tmp")
        model = os.path.join(tmp, "test_torch_export_model_%d.yaml" % os.getpid())
        scenario = os.path.join(tmp, "test_torch_export_scenario_%d.yaml" % os.getpid())
        try:
            r = run_cli(user_models() + ":Attention", "--input-shape", "8,16", "-o", model)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(scenario, "w") as f:
                f.write("name: exported\n"
                        "cluster: {nodes: 1, gpus_per_node: 1, gpu: h100-sxm, intra: {bandwidth_GBps: 450}}\n"
                        "model: {preset: %s}\n"
                        "data: {train_samples: 1000}\n"
                        "recipe: {batch_per_worker: 10, epochs: 1}\n" % os.path.basename(model))
            for arg in (scenario, model):
                got, why = self.rehearsal_model(program, arg)
                self.assertIsNotNone(got, "%s model --json %s: %s" % (program, arg, why))
                self.assertEqual(got["parameters"], 1088)
                self.assertEqual(len(got["layers"]), 2)
        finally:
            for p in (model, scenario):
                if os.path.exists(p):
                    os.remove(p)


if __name__ == "__main__":
    start = time.time()
    prog = unittest.main(exit=False, verbosity=2)
    sys.stderr.write("test_torch_export.py: %.1f s\n" % (time.time() - start))
    sys.exit(0 if prog.result.wasSuccessful() else 1)
