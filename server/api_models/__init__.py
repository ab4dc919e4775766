"""The declared shapes of `/api/v1`: every request body and every answer is one of these pydantic
models, and the OpenAPI 3.1 description (server/api/openapi.py) is generated from them.

Answers are built by validating into these models (`out(Model, ...)`), so an answer that strays
from its declaration fails in the server, not in a client. Leaderboards and published snapshots are
served byte for byte from their render cache and snapshot rows; their models are the board's own
(server.boards.board_model), and the tests check every served board against them.
"""

# one namespace for the declared models (`from server import api_models as m`; `m.PhaseOut`),
# written in the modules below by subject
from server.api_models.base import *  # noqa: F403
from server.api_models.boards import *  # noqa: F403
from server.api_models.campaigns import *  # noqa: F403
from server.api_models.competitions import *  # noqa: F403
from server.api_models.people import *  # noqa: F403
from server.api_models.submissions import *  # noqa: F403
from server.api_models.tasks import *  # noqa: F403
from server.api_models.uploads import *  # noqa: F403
