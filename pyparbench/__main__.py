from pyparbench.cli import main

raise SystemExit(main())
