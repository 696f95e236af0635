"""An LLM judge as the pairwise evidence scorer of AVeriTeC-style scoring (the option beside METEOR).

``LLMJudge(llm, member)`` is a ``(prediction, reference) -> float`` callable: 1.0 when the model says the
predicted evidence states the reference's information, 0.5 for partly, 0.0 otherwise (or when the model fails).
Pass it as ``judge=`` to ``evidence_scoring.averitec_score`` or as ``scorer=`` to ``contamination_score``.
Every call goes through the LLM resource, so its cache makes a re-scoring free.
"""

from typing import Literal

from pydantic import BaseModel

from assets.ensemble.asking import ask
from dagster_project.resources.llm import LLMResource

COVERED = {"yes": 1.0, "partly": 0.5, "no": 0.0}


class JudgeAnswer(BaseModel):
    covered: Literal["yes", "partly", "no"]


class LLMJudge:
    def __init__(self, llm: LLMResource, member: str, stage: str = "evaluation", chars: int = 1500):
        self.llm, self.member, self.stage, self.chars = llm, member, stage, chars
        self.__name__ = f"llm_judge:{member}"
        self.failures = 0

    def __call__(self, prediction: str, reference: str) -> float:
        if not prediction.strip() or not reference.strip():
            return 0.0
        answer = ask(self.llm, self.member, "verifier_judge", JudgeAnswer, stage=self.stage,
                     prediction=prediction[: self.chars], reference=reference[: self.chars])
        if answer.parsed is None:
            self.failures += 1
            return 0.0
        return COVERED[answer.parsed["covered"]]
