"""Fit a line y = w*x + b by gradient descent with reftorch tensors.

The gradients are written out by hand with tensor ops, so every step below runs through
reftorch's dispatcher: on the C plugin's kernels where installed, else on the reference.
"""
import reftorch as torch

torch.set_printoptions(precision=4)

# Noisy samples of y = 3x - 2 on a grid (the noise is a fixed pattern, not random).
x = torch.linspace(-1, 1, 200)
noise = (torch.arange(200) % 7 - 3) * 0.01
y = 3 * x - 2 + noise

w = torch.zeros(1)
b = torch.zeros(1)
learning_rate = 0.5
n = x.numel()

for step in range(201):
    error = w * x + b - y                  # broadcasting: (1,) with (200,)
    loss = (error * error).tolist()
    grad_w = (2 / n) * sum((error * x).tolist())
    grad_b = (2 / n) * sum(error.tolist())
    w -= learning_rate * grad_w             # in-place ops on the parameters
    b -= learning_rate * grad_b
    if step % 50 == 0:
        print(f"step {step:3d}  loss {sum(loss) / n:.6f}  w {w.item():+.4f}  b {b.item():+.4f}")

print("fitted:", torch.cat([w, b]) if hasattr(torch, "cat") else (w, b))
print("kernels serving float32 add on cpu:", torch.plugins.serving("add", "cpu", torch.float32))
print("loaded plugins:", sorted(torch.plugins.loaded()))
assert abs(w.item() - 3) < 0.05 and abs(b.item() + 2) < 0.05, "the fit did not converge"
