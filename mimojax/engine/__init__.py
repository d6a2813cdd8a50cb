"""The generation engine: JetStream's Engine API over our decoder, plus the drivers."""

from mimojax.engine.api import DecodeState, Prefix, ResultTokens, SlotData
from mimojax.engine.client import AsyncEngineClient
from mimojax.engine.engine import EngineError, JaxEngine, bucket_length
from mimojax.engine.offline import generate
from mimojax.engine.sampling import SamplingError, SamplingParams, sample_key
from mimojax.engine.scheduler import Completion, Scheduler

__all__ = [
    "AsyncEngineClient",
    "Completion",
    "DecodeState",
    "EngineError",
    "JaxEngine",
    "Prefix",
    "ResultTokens",
    "SamplingError",
    "SamplingParams",
    "Scheduler",
    "SlotData",
    "bucket_length",
    "generate",
    "sample_key",
]
