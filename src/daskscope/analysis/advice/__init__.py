"""The advice rule engine (issue 14): a registry of rules over recorded facts."""

from daskscope.analysis.advice import resources, scheduling  # noqa: F401  (they register)
from daskscope.analysis.advice.base import (
    SCOPES,
    SEVERITIES,
    Advice,
    AdviceFacts,
    Evidence,
    RuleSpec,
    advise,
    registered_rules,
    rule,
)

__all__ = [
    "SCOPES",
    "SEVERITIES",
    "Advice",
    "AdviceFacts",
    "Evidence",
    "RuleSpec",
    "advise",
    "registered_rules",
    "rule",
]
