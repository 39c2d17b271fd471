# %% [markdown]
# # OT-CLIP: CLIP's loss as optimal transport, and OT inference
#
# Shi, Fan & Yan (ICML 2024): InfoNCE equals KL(I/n ‖ P) for the one-sided entropic OT plan
# P = softmax(S/ε)/n; two-sided, unbalanced and fused Gromov-Wasserstein plans generalise it, and
# at test time an OT plan between test images and class prompts can impose a known class prior.

# %%
EXTRAS = "data,notebooks"
# {install}

# %%
import tempfile

import jax, jax.numpy as jnp, numpy as np

from jaxlab import ot_clip
from jaxlab.config_files import load_config
from jaxlab.data.digits import load_digits_split
from jaxlab.ot_clip import digits_pairs
from jaxlab.ot_clip.two_tower import TwoTower
from jaxlab.train.trainer import train

# %% [markdown]
# ## InfoNCE is one-sided entropic OT

# %%
x = jax.random.normal(jax.random.key(0), (16, 8)); y = x + 0.5 * jax.random.normal(jax.random.key(1), (16, 8))
scale = 1 / 0.07
print(ot_clip.clip_loss(x, y, scale), ot_clip.one_sided_ot_loss(x, y, scale))
np.testing.assert_allclose(ot_clip.clip_loss(x, y, scale), ot_clip.one_sided_ot_loss(x, y, scale), rtol=1e-5)

# %% [markdown]
# ## Train a two-tower model with the entropic-OT loss through the one step
# Digit images and generated captions; zero-shot prompts come from held-out templates.

# %%
config = load_config("digits_clip:tiny")
config.num_steps = 40 if TINY else 300
result = train(config, tempfile.mkdtemp(), progress=False)
{k: result.summary[k] for k in ("final_loss", "zero_shot_accuracy", "ot_zero_shot_accuracy")}

# %% [markdown]
# ## Long-tailed test set: OT inference with the known class prior

# %%
data = load_digits_split(test_fraction=config.data.test_fraction, seed=config.data.split_seed)
idx, prior = digits_pairs.long_tailed_indices(data["y_test"], 10.0, np.random.default_rng(0))
vocab = digits_pairs.build_vocab(); prompts = digits_pairs.class_prompt_tokens(vocab)
model = TwoTower(vocab_size=len(vocab) + 1, **dict(config.model))
params = {"params": result.state.params}
images = model.apply(params, data["x_test"][idx], method=TwoTower.encode_image)
text = model.apply(params, prompts.reshape(-1, prompts.shape[-1]), method=TwoTower.encode_text)
classes = text.reshape(prompts.shape[0], prompts.shape[1], -1).mean(1)
labels = data["y_test"][idx]
acc = lambda pred: float(np.mean(np.asarray(pred) == labels))
res = {"argmax": acc(ot_clip.zero_shot_predict(images, classes)),
       "OT, uniform prior": acc(ot_clip.ot_zero_shot(images, classes, epsilon=0.05)),
       "OT, known prior": acc(ot_clip.ot_zero_shot(images, classes, epsilon=0.05, class_prior=prior))}
print(res)
assert res["OT, known prior"] > res["OT, uniform prior"]
