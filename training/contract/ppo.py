"""Task ppo's knobs (the RLHF loop of ColossalAI chat's PPO benchmark); what a whole ppo workload must satisfy
is checked with the workload (``spec.check_ppo``)."""
from __future__ import annotations

from typing import Optional, TypeVar

from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, model_validator

from training.contract.spec_base import STEPS_REASON, WIDTH_REASON, StrictModel, bounded

Model = TypeVar("Model", bound=StrictModel)  # the actor's ModelSpec (spec.py imports this module)


class PPOSpec(StrictModel):
    """RLHF PPO (task ppo), the knobs of ColossalAI chat's PPO benchmark (``training/torch/ppo_loop.py``).

    One episode is ``max_timesteps`` experience makings of ``experience_batch_size`` prompts per rank; every
    ``update_timesteps`` of them, the collected experience is learned from for ``max_epochs`` passes in
    batches of ``train_batch_size``. The first episode is the warm-up. The reference: prompts of 400 tokens,
    generated up to 512 (generation_length 112), temperature 1.0, top-k 50.
    """

    experience_batch_size: PositiveInt = bounded(8, le=1 << 16, why="prompts per rank per experience making")
    train_batch_size: Optional[PositiveInt] = bounded(None, le=1 << 16, why="samples per rank per learning step",
                                                       description="default: train.micro_batch_size")
    num_episodes: PositiveInt = bounded(3, le=100_000, why=STEPS_REASON, description="the first is warm-up")
    max_timesteps: PositiveInt = bounded(8, le=100_000, why=STEPS_REASON)
    update_timesteps: PositiveInt = bounded(8, le=100_000, why=STEPS_REASON)
    max_epochs: PositiveInt = bounded(1, le=100_000, why=STEPS_REASON)
    prompt_length: PositiveInt = bounded(400, le=1 << 20, why="a million tokens is beyond any benchmark here")
    generation_length: PositiveInt = bounded(112, le=1 << 20, why="a million tokens is beyond any benchmark here",
                                              description="tokens generated after the prompt (no early stop)")
    temperature: PositiveFloat = Field(1.0, allow_inf_nan=False)
    top_k: NonNegativeInt = Field(50, description="sample among the k likeliest tokens; 0: the whole vocabulary")
    kl_coef: float = Field(0.1, ge=0, allow_inf_nan=False, description="KL penalty against the initial model")
    clip_eps: PositiveFloat = Field(0.2, allow_inf_nan=False, description="policy ratio clip")
    value_clip: PositiveFloat = Field(0.4, allow_inf_nan=False, description="value loss clip")
    critic_n_layer: Optional[PositiveInt] = bounded(None, le=1024, why="as model.n_layer",
                                                     description="a smaller critic/reward; default: the actor's")
    critic_d_model: Optional[PositiveInt] = bounded(None, le=1 << 17, why=WIDTH_REASON)
    critic_n_head: Optional[PositiveInt] = bounded(None, le=1024, why="as model.n_head")

    @model_validator(mode="after")
    def _updates_fit_an_episode(self) -> "PPOSpec":
        if self.max_timesteps % self.update_timesteps:
            raise ValueError(f"max_timesteps ({self.max_timesteps}) must be a multiple of update_timesteps "
                             f"({self.update_timesteps}), so every episode learns the same number of times")
        if self.num_episodes < 2:
            raise ValueError("num_episodes must be at least 2: the first episode is warm-up, excluded")
        return self

    @property
    def updates_per_episode(self) -> int:
        return self.max_timesteps // self.update_timesteps

    @property
    def total_length(self) -> int:
        return self.prompt_length + self.generation_length

    def critic_model(self, actor: Model) -> Model:
        update = {k: v for k, v in (("n_layer", self.critic_n_layer), ("d_model", self.critic_d_model),
                                    ("n_head", self.critic_n_head)) if v is not None}
        if "d_model" in update and self.critic_d_model != actor.d_model:
            update.setdefault("d_ff", None)
        return type(actor).model_validate({**actor.model_dump(), **update})
