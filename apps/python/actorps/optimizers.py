"""Optimizers, as ``tf.keras.optimizers``: the PS shards apply them
([training] optimizer, learning_rate and the optimizer's keys; TF's
formulas). ``learning_rate_decay`` (per epoch: epoch e trains with
learning_rate * decay^(e-1)) and ``warmup_steps`` are actorps's
stand-ins for learning-rate schedules."""

__all__ = ["Optimizer", "SGD", "Adam", "Adagrad", "Ftrl", "get"]


class Optimizer:
    """The base: `_training()` gives the [training] keys."""

    kind = None

    def __init__(self, learning_rate, learning_rate_decay=1.0, warmup_steps=0):
        self.learning_rate = learning_rate
        self.learning_rate_decay = learning_rate_decay
        self.warmup_steps = warmup_steps

    def _keys(self):
        return {}

    def _training(self):
        keys = {"optimizer": self.kind, "learning_rate": float(self.learning_rate)}
        if self.learning_rate_decay != 1:
            keys["learning_rate_decay"] = float(self.learning_rate_decay)
        if self.warmup_steps:
            keys["warmup_steps"] = int(self.warmup_steps)
        keys.update(self._keys())
        return keys

    def get_config(self):
        """The optimizer's settings as a dict (its [training] keys)."""
        return self._training()

    def __repr__(self):
        return f"{type(self).__name__}(learning_rate={self.learning_rate!r})"


class SGD(Optimizer):
    """Gradient descent; with `momentum` > 0, momentum (``optimizer =
    "momentum"``), Nesterov's with `nesterov`."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, **kw):
        super().__init__(learning_rate, **kw)
        self.momentum = momentum
        self.nesterov = nesterov

    @property
    def kind(self):
        """[training] optimizer: "momentum" with momentum or nesterov, else "sgd"."""
        return "momentum" if self.momentum or self.nesterov else "sgd"

    def _keys(self):
        if self.kind == "sgd":
            return {}
        return {"momentum": float(self.momentum), "nesterov": bool(self.nesterov)}


class Adam(Optimizer):
    """Adam (``optimizer = "adam"``; Keras' betas 0.9, 0.999 and epsilon 1e-7)."""

    kind = "adam"

    def __init__(self, learning_rate=0.001, **kw):
        super().__init__(learning_rate, **kw)


class Adagrad(Optimizer):
    """Adagrad (``optimizer = "adagrad"``)."""

    kind = "adagrad"

    def __init__(self, learning_rate=0.001, **kw):
        super().__init__(learning_rate, **kw)


class Ftrl(Optimizer):
    """FTRL-proximal (``optimizer = "ftrl"``: ftrl_l1, ftrl_l2, ftrl_lr_power, ftrl_beta)."""

    kind = "ftrl"

    def __init__(self, learning_rate=0.001, learning_rate_power=-0.5, l1_regularization_strength=0.0,
                 l2_regularization_strength=0.0, beta=0.0, **kw):
        super().__init__(learning_rate, **kw)
        self.learning_rate_power = learning_rate_power
        self.l1_regularization_strength = l1_regularization_strength
        self.l2_regularization_strength = l2_regularization_strength
        self.beta = beta

    def _keys(self):
        return {"ftrl_l1": float(self.l1_regularization_strength), "ftrl_l2": float(self.l2_regularization_strength),
                "ftrl_lr_power": float(self.learning_rate_power), "ftrl_beta": float(self.beta)}


_BY_NAME = {"sgd": SGD, "adam": Adam, "adagrad": Adagrad, "ftrl": Ftrl}


def get(identifier):
    """An optimizer from a name ("sgd", "adam", "adagrad", "ftrl"; Keras'
    defaults) or an Optimizer as it is."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"unknown optimizer {identifier!r} (expected one of {', '.join(_BY_NAME)} or an Optimizer)")
