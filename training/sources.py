"""Every source the retrieval model is trained on: where it comes from, its licence, how it is used.

Only these are read. From the four retrieval benchmarks only the dev halves bundled with the
steering repository (``../shared/benchmarks``) are used — never files from the benchmarks' own
repositories, which hold the held-out halves — and nothing from any of ToolRet's evaluation tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks"


@dataclass(frozen=True)
class Source:
    name: str
    repository: str
    commit: str
    licence: str
    use: str

    def folder(self, root: Path = BENCHMARKS) -> Path:
        return root / self.name


# The dev halves as converted in the steering repository (their README.md files give the source
# repository and commit); the held-out halves of the same catalogs are what the product is measured on.
SOURCES: tuple[Source, ...] = (
    Source(
        "metatool",
        "https://github.com/HowieHwong/MetaTool",
        "35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb",
        "MIT",
        "dev queries -> gold tools; tool texts -> pseudo-queries",
    ),
    Source(
        "bfcl",
        "https://github.com/ShishirPatil/gorilla (BFCL v4 single-turn)",
        "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8",
        "Apache-2.0",
        "dev queries -> gold tools; tool texts -> pseudo-queries",
    ),
    Source(
        "seal_tools",
        "https://github.com/fairyshine/Seal-Tools",
        "ce753ecd60ed08dd376984035de531ab8421f1c6",
        "Apache-2.0",
        "dev queries -> gold tools; tool texts -> pseudo-queries",
    ),
    Source(
        "livemcpbench",
        "https://github.com/icip-cas/LiveMCPBench",
        "a928e57d1ee7a25579b9a7036030faffff72d15b",
        "Apache-2.0",
        "dev queries -> gold tools; tool texts -> pseudo-queries",
    ),
    Source(
        "bfcl_multiturn",
        "https://github.com/ShishirPatil/gorilla (BFCL v4 multi-turn)",
        "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8",
        "Apache-2.0",
        "each turn's user request -> the tools its steps call; tool texts -> pseudo-queries",
    ),
)

BY_NAME = {s.name: s for s in SOURCES}
# The datasets a leave-one-dataset-out run can hold out (bfcl_multiturn is measured by the loop benchmark).
RETRIEVAL_SETS = ("metatool", "bfcl", "seal_tools", "livemcpbench")


@dataclass(frozen=True)
class ExternalCatalog:
    """A public tool catalog outside the benchmarks: tool texts only (pseudo-queries), no requests."""

    name: str
    repository: str
    commit: str
    licence: str
    use: str


# Converted by ``training.experiments.external_catalogs`` from a clone at the pinned commit.
EXTERNAL_CATALOGS: tuple[ExternalCatalog, ...] = (
    ExternalCatalog(
        "mcp_registry",
        "docker/mcp-registry",
        "818bf169b365e7b7d5b117352e32757c54844718",
        "MIT",
        "servers/*/tools.json in the history of that commit (each file's last version) -> pseudo-queries",
    ),
    ExternalCatalog(
        "github_mcp",
        "github/github-mcp-server",
        "64a49f34d076b6f5917dae1424521d43c7bcae84",
        "MIT",
        "pkg/github/__toolsnaps__/*.snap (one MCP tool schema each) -> pseudo-queries",
    ),
)


@dataclass(frozen=True)
class UtteranceSource:
    """A public set of labelled utterances (no tools): what small talk is compared with."""

    repository: str
    commit: str
    licence: str
    use: str


# Read by ``training.small_talk_exemplars`` from a clone at the pinned commit (train split only).
SMALL_TALK_SOURCE = UtteranceSource(
    "clinc/oos-eval",
    "828f8093932c8fe6ca7936c3d2e52903b1c523de",
    "CC BY 3.0 (Larson et al., 2019, 'An Evaluation Dataset for Intent Classification and Out-of-Scope Prediction')",
    "train split: utterances of 15 conversational intents (no tool) and of the 133 others but cancel and repeat "
    "(tool requests) -> sk_toolfilter/retrieval/data/small_talk_exemplars.json",
)


@dataclass(frozen=True)
class MultiToolSet:
    """A public set of requests labelled with the tools they need, outside the evaluation families:
    training data for the second stage (and the first), and its own leave-one-catalog-out fold."""

    name: str
    repository: str
    commit: str
    paths: str
    licence: str
    note: str = ""


# Converted by ``training.multi_tool_sets`` from a checkout of the pinned commit (issue 47). Never:
# ToolBench / StableToolBench / COLT / ToolLens or anything built from the ToolBench RapidAPI pool
# (xLAM / APIGen mixes included), UltraTool, MCP-Bench, or the benchmarks' own repositories.
MULTI_TOOL_SETS: tuple[MultiToolSet, ...] = (
    MultiToolSet(
        "callnavi",
        "Etamin/CallNavi",
        "520e2809b6af7c20b4c07e14ab464ee34fe49a9f",
        "Dataset/Questions/*.json + Dataset/APIs/*.json",
        "MIT",
        "its README says MIT; its LICENSE file is the MIT text with the name and year left blank "
        "('Copyright (c) [year] [fullname]')",
    ),
    MultiToolSet(
        "nestful",
        "IBM/NESTFUL",
        "053cbde0446dddd31e8293f179085e1b39ab79b5",
        "data/*/*-data.json + data/*/*-spec.json",
        "Apache-2.0",
        "dropped first: every Glaive-part function whose name or description matches a bfcl tool, and the "
        "executable part's APIs on the RapidAPI hosts weatherapi-com and coronavirus-smartable",
    ),
    MultiToolSet(
        "restbench",
        "Yifan-Song793/RestGPT",
        "d99012860cb45323975bf5780152d7aa44f390f5",
        "datasets/{tmdb,spotify}.json + specs/*_oas.json",
        "MIT",
    ),
    MultiToolSet(
        "acebench",
        "ACEBench/ACEBench",
        "e6db74b735ead22c24f27367606a9408573b848f",
        "data_all/data_en/data_normal_single_turn_parallel_function.json + possible_answer/ (requests); "
        "every function of data_all/data_en/*.json (the catalog: the others are negatives)",
        "MIT",
    ),
    MultiToolSet(
        "tooltalk",
        "microsoft/ToolTalk",
        "e05f4ce6132c80ed33392b81535b077d56ab28fd",
        "src/tooltalk/apis/*.py (read with ast, not imported) + data/{easy,tooltalk}/*.json (first user turn)",
        "MIT",
    ),
    MultiToolSet(
        "apibank",
        "AlibabaResearch/DAMO-ConvAI",
        "483554eae102996f5ec1f4feab4e78ef29c2a394",
        "api-bank/apis/*.py (read with ast, not imported) + api-bank/lv1-lv2-samples/level-1-given-desc/*.jsonl "
        "(first user turn)",
        "Apache-2.0 (api-bank/LICENSE)",
    ),
)
