"""Score cache and run records."""

from .cache import SCHEMA_VERSION, CachedScorer, CacheInfo, ModelSetup, ScoreCache, score_key
from .repair import RepairReport, repair_cache
from .run import (
    RUN_SCHEMA_VERSION,
    RunDir,
    RunFolder,
    analysis_upgrade,
    as_run_dir,
    folder_path,
    interrupted_reanalysis,
    read_records,
    releases_run_dir,
)

__all__ = [
    "ScoreCache",
    "CacheInfo",
    "ModelSetup",
    "CachedScorer",
    "score_key",
    "SCHEMA_VERSION",
    "RunDir",
    "RunFolder",
    "as_run_dir",
    "folder_path",
    "interrupted_reanalysis",
    "RUN_SCHEMA_VERSION",
    "analysis_upgrade",
    "read_records",
    "releases_run_dir",
    "repair_cache",
    "RepairReport",
]
