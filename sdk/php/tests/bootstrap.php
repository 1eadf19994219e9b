<?php

declare(strict_types=1);

require __DIR__ . '/../autoload.php';
require __DIR__ . '/FakeCore.php';
require __DIR__ . '/Peer.php';

const VECTORS_DIR = __DIR__ . '/../../../proto/vectors';
