from ductline.cli import main

main()
