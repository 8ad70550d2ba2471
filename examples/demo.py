"""Train a small classifier with reftorch the way one would with PyTorch: a Dataset and a
DataLoader, an nn.Module, a loss, an optimizer and a learning-rate schedule, then save the
weights in PyTorch's checkpoint format and load them back.

Every op runs through reftorch's dispatcher: on the C plugin's kernels where installed, else
on the NumPy reference.
"""
import io
import math

import reftorch as torch
from reftorch import nn
from reftorch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

# Two interleaved spirals: points (x, y) labelled by the arm they lie on.
n_per_class = 200
t = torch.linspace(0.0, 1.0, n_per_class)
angle = 3 * math.pi * t
arms = [torch.stack([t * torch.cos(angle + shift), t * torch.sin(angle + shift)], dim=1)
        for shift in (0.0, math.pi)]
points = torch.cat(arms) + 0.02 * torch.randn(2 * n_per_class, 2)
labels = torch.cat([torch.zeros(n_per_class, dtype=torch.long),
                    torch.ones(n_per_class, dtype=torch.long)])

loader = DataLoader(TensorDataset(points, labels), batch_size=40, shuffle=True)

model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                      nn.Linear(64, 2))
print(model)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=40, gamma=0.5)

for epoch in range(120):
    for batch, target in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(batch), target)
        loss.backward()
        optimizer.step()
    scheduler.step()
    if epoch % 20 == 0 or epoch == 119:
        with torch.no_grad():
            accuracy = (model(points).argmax(dim=1) == labels).float().mean().item()
        print(f"epoch {epoch:3d}  loss {loss.item():.4f}  accuracy {accuracy:.3f}  "
              f"lr {scheduler.get_last_lr()[0]:.4f}")

# Save in PyTorch's format (real torch can load this file) and restore into a fresh model.
buffer = io.BytesIO()
torch.save(model.state_dict(), buffer)
buffer.seek(0)
restored = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 2))
restored.load_state_dict(torch.load(buffer))
with torch.no_grad():
    assert torch.equal(restored(points), model(points)), "the restored model differs"

print("kernels serving float32 add on cpu:", torch.plugins.serving("add", "cpu", torch.float32))
print("loaded plugins:", sorted(torch.plugins.loaded()))
assert accuracy > 0.95, f"the classifier did not learn the spirals (accuracy {accuracy})"
