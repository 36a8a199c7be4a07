"""The training Evaluator: built once, called with a model held in memory; its numbers equal a `vlbench run` of
the checkpoint saved at that moment, the caption perturbations are made once, and the model leaves the call in
the mode it came in. The Hugging Face Trainer callback calls it."""

from __future__ import annotations

import json
import shutil

import pytest
from support.data import write_manifest
from support.tools import require_package

OPTIONS = dict(perturb="char-swap", num_workers=0, n_boot=20, no_cache=True, validity="off", batch_size=4)


def _values(doc: dict) -> dict:
    return {(r["condition"], r["direction"], r["metric"], r["k"]): r["value"] for r in doc["results"]}


def _cli_run(model: str, man, out, *extra: str) -> dict:
    from vlbench.cli import main

    assert main(["run", "--model", model, "--dataset", f"custom:{man}", "--out", str(out), "--quiet",
                 "--perturb", OPTIONS["perturb"], "--num-workers", "0", "--bootstrap", "20", "--no-cache",
                 "--validity", "off", "--batch-size", "4", *extra]) == 0
    return json.loads((out / "results.json").read_text())


def test_evaluator_after_two_training_steps_equals_a_run_of_the_saved_checkpoint(tiny_models, tmp_path,
                                                                                 monkeypatch):
    import open_clip
    import torch
    import torch.nn.functional as F

    from vlbench.imageperturb import apply
    from vlbench.pipeline import runner
    from vlbench.training import Evaluator

    made, corrupted = [], []
    real, real_corrupt = runner.perturbed_captions, apply.corrupt
    monkeypatch.setattr(runner, "perturbed_captions", lambda *a, **k: made.append(1) or real(*a, **k))
    monkeypatch.setattr(apply, "corrupt", lambda *a, **k: corrupted.append(1) or real_corrupt(*a, **k))
    man = write_manifest(tmp_path / "data", 6)
    start = tiny_models("openclip")
    model, _, preprocess = open_clip.create_model_and_transforms(f"local-dir:{start}")
    tokenizer = open_clip.get_tokenizer(f"local-dir:{start}")
    evaluator = Evaluator(f"custom:{man}", out=str(tmp_path / "evals"), perturb_images="gaussian_noise:2",
                          **OPTIONS)
    assert made == [1]  # the caption perturbations: made when the Evaluator is built

    torch.manual_seed(0)
    images, texts = torch.randn(4, 3, 32, 32), tokenizer(["a dog runs", "two men", "a red car", "the sea"])
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    model.train()
    results = []
    for step in (1, 2):
        if step == 2:
            assert len(corrupted) == 6  # the first call corrupted each gallery image once
        img = F.normalize(model.encode_image(images), dim=-1)
        txt = F.normalize(model.encode_text(texts), dim=-1)
        logits = 10 * img @ txt.T
        loss = F.cross_entropy(logits, torch.arange(4)) + F.cross_entropy(logits.T, torch.arange(4))
        opt.zero_grad()
        loss.backward()
        opt.step()
        results.append(evaluator(model, preprocess=preprocess, tokenizer=tokenizer, step=step))
        assert model.training  # handed back in training mode
    assert made == [1]  # the second call made no caption perturbation again
    assert len(corrupted) == 6  # nor corrupted an image again: it read the kept ones
    second = results[1].record.other["encoding"]
    assert second["texts_encoded"] > 0  # but encoded the captions with the new weights (no stale cache)
    assert (tmp_path / "evals" / "step-2" / "results.json").is_file()

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    shutil.copy(start / "open_clip_config.json", ckpt)
    torch.save(model.state_dict(), ckpt / "open_clip_pytorch_model.bin")
    cli = _cli_run(f"openclip:{ckpt}", man, tmp_path / "cli", "--perturb-images", "gaussian_noise:2")
    got = _values(results[1].results)
    assert got == _values(cli)  # every metric record, exactly
    assert {"clean", "char-swap", "img:gaussian_noise:2"} <= {c for c, *_ in got}
    assert _values(results[0].results) != got  # the first checkpoint's weights gave other numbers


def test_trainer_callback_evaluates_a_transformers_model_on_evaluate_and_on_save(tiny_models, tmp_path):
    import transformers  # noqa: F401  (a core dependency: never skipped on)
    from transformers import CLIPModel, CLIPProcessor, TrainerControl, TrainerState

    from vlbench.training import Evaluator, VlbenchCallback

    man = write_manifest(tmp_path / "data", 6)
    folder = tiny_models("clip")
    model, processor = CLIPModel.from_pretrained(folder), CLIPProcessor.from_pretrained(folder)
    cb = VlbenchCallback(Evaluator(f"custom:{man}", **OPTIONS), processor, at=("evaluate", "save"))
    state, metrics = TrainerState(global_step=7), {"eval_loss": 1.0}
    cb.on_evaluate(None, state, TrainerControl(), model=model, metrics=metrics)
    cb.on_save(None, state, TrainerControl(), model=model)
    assert len(cb.results) == 2 and cb.results[0].record.model.label.endswith("step-7")
    assert metrics["vlbench/clean/t2i/recall@1"] == cb.results[0].record.value("clean", "t2i", "recall", 1)
    assert _values(cb.results[0].results) == _values(_cli_run(f"clip:{folder}", man, tmp_path / "cli"))


def test_evaluator_takes_any_adapter_and_reports_each_checkpoint_at_its_step(counting_plugin, tmp_path,
                                                                            monkeypatch):
    require_package("tensorboard", "reads the TensorBoard event files back")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from vlbench.models.adapter import load_model
    from vlbench.training import Evaluator

    monkeypatch.setenv("VLBENCH_TENSORBOARD_DIR", str(tmp_path / "tb"))
    man = write_manifest(tmp_path / "data", 6)
    evaluator = Evaluator(f"custom:{man}", report_to="tensorboard", project="train", **OPTIONS)
    adapter = load_model("counting:dim=16", device="cpu")
    first, second = evaluator(adapter, step=100), evaluator(adapter, step=200)
    runs = sorted((tmp_path / "tb" / "train").iterdir())
    assert [p.name for p in runs] == sorted([first.record.run_id, second.record.run_id])
    for run, result, step in ((first, first, 100), (second, second, 200)):
        acc = EventAccumulator(str(tmp_path / "tb" / "train" / run.record.run_id), size_guidance={"scalars": 0})
        acc.Reload()
        (event,) = acc.Scalars("clean/t2i/recall@1")
        assert event.step == step and event.value == pytest.approx(result.record.value("clean", "t2i", "recall", 1),
                                                                   rel=1e-6)
    assert not first.out_dir.exists()  # no out: the call's files lived in a temporary folder only
