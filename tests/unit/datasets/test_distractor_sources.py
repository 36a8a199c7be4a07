"""--distractors sources named twice under two spellings, and caption lines too long to tokenize."""

from __future__ import annotations

import pytest

from support.data import write_images
from vlbench.datasets.distractors import MAX_CAPTION_CHARS, check_source, load_distractors, parse_spec
from vlbench.errors import DataError, OptionError
from vlbench.pipeline.run_config import RunConfig, validate


@pytest.mark.parametrize("second", ["{d}/", "{d}/.", "{d}/../neg"])
def test_the_same_images_folder_spelt_twice_is_refused_by_its_resolved_path(tmp_path, second):
    write_images(tmp_path / "neg", 2)
    d = str(tmp_path / "neg")
    spec = f"images:{d},images:{second.format(d=d)}"
    with pytest.raises(OptionError) as e:
        parse_spec(spec)
    assert e.value.option == "distractors" and repr(str(tmp_path / "neg")) in e.value.message
    with pytest.raises(OptionError):  # before any work: the run's option check
        validate(RunConfig(model="clip", dataset="flickr30k", distractors=spec))


def test_the_same_captions_file_spelt_twice_is_refused(tmp_path, monkeypatch):
    (tmp_path / "adv.txt").write_text("a red car\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OptionError) as e:
        parse_spec(f"captions:adv.txt,captions:./adv.txt,images:{tmp_path}")
    assert "captions:adv.txt and captions:./adv.txt" in e.value.message
    assert len(parse_spec(f"captions:adv.txt,images:{tmp_path}")) == 2  # different sources stay allowed


def test_a_caption_line_over_the_length_limit_is_refused_before_tokenizing(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("a red car\n" + "word " * (24_000_000 // 5) + "\nshort\n")
    problem = check_source("captions", str(big))
    assert problem is not None and f"{MAX_CAPTION_CHARS:,}" in problem[0] and "line 2" in problem[0]
    with pytest.raises(DataError) as e:
        load_distractors(f"captions:{big}")
    assert f"{MAX_CAPTION_CHARS:,}" in e.value.message
    ok = tmp_path / "ok.txt"
    ok.write_text("x" * MAX_CAPTION_CHARS + "\n")  # at the limit: read
    assert load_distractors(f"captions:{ok}").captions == ("x" * MAX_CAPTION_CHARS,)
